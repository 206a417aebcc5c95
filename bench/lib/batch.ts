import { load } from "./load.js";
import { type LoadScenarioResult, measuredLoad, type Settings, smsBody, withStack } from "./scenarios.js";
import { BENCH_SENDER, type Stack } from "./stack.js";

/**
 * Scenario `accept-batch` (issue 20): messages accepted per second through
 * `POST /api/v1/notifications/sms/batch` with batches of 100 at 16 connections, beside single
 * sends at 64 connections on the same stack, in the same minutes (the worker stopped in both).
 * Each batch's items name 100 different recipients. Every stored message is counted, so a batch
 * whose items were refused cannot pass for an accepted one.
 */
export interface AcceptBatchResult {
  single: LoadScenarioResult;
  batch: LoadScenarioResult & { itemsPerRequest: number; messagesPerS: number; stored: number };
  /** Batch messages/s ÷ single sends' requests/s (the target: at least 4). */
  ratio: number;
}

const ITEMS = 100;
const BATCH_CONNECTIONS = 16;
const SINGLE_CONNECTIONS = 64;

const batchBody = JSON.stringify(
  Array.from({ length: ITEMS }, (_, i) => ({
    payload: { to: `+1415555${String(1000 + i)}`, body: "Your order has shipped", sender: BENCH_SENDER },
  })),
);

/** One connection per organization, taken round robin (as the single sends' scenarios do). */
function post(stack: Stack, path: string, body: string, connections: number, expectedStatus: number) {
  let next = 0;
  return {
    url: `${stack.base}${path}`,
    method: "POST" as const,
    connections,
    body,
    headers: { "content-type": "application/json", "x-api-key": stack.apiKey },
    setupClient: (client: { setHeaders: (headers: Record<string, string>) => void }) => {
      const organization = stack.organizations[next++ % stack.organizations.length];
      client.setHeaders({ "content-type": "application/json", "x-api-key": organization?.apiKey ?? "" });
    },
    expectedStatus,
  };
}

async function storedMessages(stack: Stack): Promise<number> {
  const [row] = await stack.sql<Array<{ n: number }>>`select count(*)::int as n from messages`;
  return row?.n ?? 0;
}

export async function acceptBatchScenario(settings: Settings): Promise<AcceptBatchResult> {
  // Each connection's organization sends well over the stack's 1,000 a second in batches: the
  // send rate may not refuse items (every one must be stored).
  const env = { ...settings.env, SEND_RATE_LIMIT: "1000000", SEND_RATE_BURST: "1000000" };
  return withStack("batch", { ...settings, env }, async (stack) => {
    const single = post(stack, "/api/v1/notifications/sms", smsBody(), SINGLE_CONNECTIONS, 202);
    const batch = post(stack, "/api/v1/notifications/sms/batch", batchBody, BATCH_CONNECTIONS, 207);
    await load({ ...single, duration: settings.warmupS });
    await load({ ...batch, duration: settings.warmupS });
    const singleResult = await measuredLoad(stack, SINGLE_CONNECTIONS, single, settings.durationS);
    const before = await storedMessages(stack);
    const batchResult = await measuredLoad(stack, BATCH_CONNECTIONS, batch, settings.durationS);
    const stored = (await storedMessages(stack)) - before;
    // Every 207 of the window stored its 100 (more may come from warm-up requests that outlived
    // their deadline and committed late): fewer means items were refused.
    const answered = (batchResult.statuses["207"] ?? 0) * ITEMS;
    if (stored < answered) {
      throw new Error(
        `${batchResult.statuses["207"]} batches of ${ITEMS} stored ${stored} messages: some items were refused`,
      );
    }
    const messagesPerS = Math.round(answered / batchResult.durationS);
    return {
      single: singleResult,
      batch: { ...batchResult, itemsPerRequest: ITEMS, messagesPerS, stored: answered },
      ratio: Math.round((messagesPerS / singleResult.requestsPerS) * 100) / 100,
    };
  });
}
