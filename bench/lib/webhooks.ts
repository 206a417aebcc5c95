import { endToEndRun, type Interleaved, interleaved } from "./interleaved.js";
import { type CpuUsage, cpuDelta, cpuSnapshot, type LoadResult, load, RssMonitor } from "./load.js";
import {
  type EndToEndResult,
  measureEndToEnd,
  type PeakRss,
  perRequest,
  type Settings,
  smsBody,
  type UntilSettled,
  waitUntilFinished,
  withStack,
} from "./scenarios.js";
import type { Stack } from "./stack.js";
import {
  HANGING_PREFIX,
  type HangingSummary,
  type ReceiptSummary,
  startWebhookReceiver,
  type WebhookReceiver,
} from "./webhook-receiver.js";

/**
 * The status-webhook scenarios (issue 16, "Performance"): end to end with one endpoint per
 * organization served by the lean local receiver of webhook-receiver.ts, and one organization's
 * endpoint hanging beside another's healthy one. Both subscribe to the final events; the latency
 * measured is the receiver's receive time − the event's own `timestamp` (its `occurred_at`).
 */

/** The events the benchmark's endpoints subscribe to: a message's final events. */
export const FINAL_WEBHOOK_EVENTS = ["message.succeeded", "message.failed", "message.rejected"] as const;
/** How long after the last final event the receipts are waited for. */
export const RECEIPT_BOUND_MS = 60_000;

/** The receiver's summary of the expected events, and whether the wait for them ran out. */
export interface Receipts extends ReceiptSummary {
  /** Every expected event arrived within RECEIPT_BOUND_MS of the last final event. */
  allWithinBound: boolean;
  boundS: number;
  /** The last receipt of an expected event − the last final event, in seconds; null: none arrived. */
  trailS: number | null;
}

/** e2e with webhooks beside e2e without, twice each, interleaved (interleaved.ts). */
export type EndToEndWebhooksResult = Interleaved<WebhooksRunResult>;

/** One run of e2e with status webhooks. */
export interface WebhooksRunResult extends EndToEndResult {
  /** Endpoints registered (one per organization) through the API. */
  endpoints: number;
  receipts: Receipts;
  /** `cpuUsPerMessage` is read when every message was final (as e2e's); this, once the receipts were in or the wait ran out. */
  untilReceipts: UntilSettled;
}

export interface WebhooksHangingResult {
  durationS: number;
  /** Messages per second each of the two organizations sent. */
  ratePerS: number;
  accept: { hanging: LoadResult; healthy: LoadResult };
  allFinalWithinBound: boolean;
  /** Organization B's endpoint: the final events of its messages, received by the healthy path. */
  healthy: Receipts;
  /** Organization A's endpoint, never answered. */
  hanging: HangingSummary & {
    /** A's final events in the window (each one a delivery owed to its endpoint). */
    finalEvents: number;
    /** `webhook_attempts` of A's endpoint by outcome (`ok` or its error class), as the service recorded them. */
    attemptsRecorded: Record<string, number>;
    /** Rows of `webhook_deliveries` still held for A's endpoint at the end. */
    deliveriesLeft: number;
  };
  cpuMs: CpuUsage;
  /** CPU µs per message (A's and B's together), from the first request until every message was final. */
  cpuUsPerMessage: Record<string, number>;
  /** The same until B's receipts were in or the wait for them ran out. */
  untilReceipts: UntilSettled;
  peakRss: PeakRss;
}

/** web and worker may POST to the receiver: plain http to its host:port, and the loopback network. */
function webhookEnv(settings: Settings, receiver: WebhookReceiver): Settings {
  return {
    ...settings,
    env: {
      ...settings.env,
      WEBHOOK_ALLOWED_HOSTS: `127.0.0.1:${receiver.port}`,
      WEBHOOK_ALLOWED_NETWORKS: "127.0.0.0/8",
    },
  };
}

/** Registers an endpoint through the API with the organization's key; returns its signing secret. */
async function createEndpoint(stack: Stack, apiKey: string, url: string): Promise<string> {
  const response = await fetch(`${stack.base}/api/v1/webhooks/endpoints`, {
    method: "POST",
    headers: { "content-type": "application/json", "x-api-key": apiKey },
    body: JSON.stringify({ url, events: FINAL_WEBHOOK_EVENTS, description: "bench" }),
  });
  const text = await response.text();
  if (response.status !== 201) throw new Error(`endpoint not created: ${response.status} ${text}`);
  return (JSON.parse(text) as { secret: string }).secret;
}

/**
 * The final events of the messages accepted since `since` (of one organization, if given): the
 * deliveries the endpoints owe. Tells the receiver to expect them, then waits until every one has
 * arrived or RECEIPT_BOUND_MS have passed since the last of them.
 */
async function awaitReceipts(
  stack: Stack,
  receiver: WebhookReceiver,
  since: Date,
  organizationId?: string,
): Promise<{ expected: number; allWithinBound: boolean; lastFinalAt: number | null }> {
  const rows = await stack.sql<Array<{ key: string; at: Date }>>`
    select f.message_id::text || ':' || f.seq as key, f.occurred_at as at
    from message_events f
    join message_events a on a.message_id = f.message_id and a.type = 'accepted' and a.occurred_at >= ${since}
    join messages m on m.message_id = f.message_id
    where f.type in ('success', 'failed', 'rejected')
      and (${organizationId ?? null}::uuid is null or m.organization_id = ${organizationId ?? null})`;
  await receiver.expect(rows.map((row) => row.key));
  if (rows.length === 0) return { expected: 0, allWithinBound: true, lastFinalAt: null };
  const lastFinalAt = rows.reduce((last, row) => Math.max(last, row.at.getTime()), 0);
  const deadline = lastFinalAt + RECEIPT_BOUND_MS;
  while (true) {
    if ((await receiver.received()) === rows.length)
      return { expected: rows.length, allWithinBound: true, lastFinalAt };
    if (Date.now() > deadline) return { expected: rows.length, allWithinBound: false, lastFinalAt };
    await sleep(250);
  }
}

function receipts(
  summary: ReceiptSummary,
  waited: { allWithinBound: boolean; lastFinalAt: number | null },
): Receipts {
  return {
    ...summary,
    allWithinBound: waited.allWithinBound,
    boundS: RECEIPT_BOUND_MS / 1000,
    trailS:
      summary.lastReceiptAt === null || waited.lastFinalAt === null
        ? null
        : Math.round((summary.lastReceiptAt - waited.lastFinalAt) / 10) / 100,
  };
}

/**
 * Scenario `e2e-webhooks`: scenario e2e (20,000 messages as fast as they are accepted, worker
 * running) with one endpoint per organization (100), each subscribed to the final events and
 * served by the local receiver, beside e2e without endpoints: twice each, interleaved
 * (interleaved.ts), the messages/s target a ratio of their sums. Each run with webhooks reports
 * e2e's figures, and the receipts: every final event of the measured messages delivered at least
 * once, within RECEIPT_BOUND_MS after the last of them.
 */
export function endToEndWebhooksScenario(settings: Settings): Promise<EndToEndWebhooksResult> {
  return interleaved(
    (round) => endToEndRun(settings, `e2enohooks${round}`),
    (round) => webhooksRun(settings, round),
  );
}

async function webhooksRun(settings: Settings, round: number): Promise<WebhooksRunResult> {
  const receiver = await startWebhookReceiver();
  try {
    return await withStack(`e2ewh${round}`, webhookEnv(settings, receiver), async (stack) => {
      const secrets: Record<string, string> = {};
      for (const organization of stack.organizations) {
        const path = `/${organization.id}`;
        secrets[path] = await createEndpoint(
          stack,
          organization.apiKey,
          `http://127.0.0.1:${receiver.port}${path}`,
        );
      }
      await receiver.setSecrets(secrets);
      let waited = { allWithinBound: false, lastFinalAt: null as number | null };
      const { endToEnd, untilSettled } = await measureEndToEnd(stack, settings, {
        receiver,
        settle: async (since) => {
          waited = await awaitReceipts(stack, receiver, since);
        },
      });
      if (!untilSettled) throw new Error("measureEndToEnd did not settle");
      const summary = await receiver.summary();
      return {
        ...endToEnd,
        endpoints: Object.keys(secrets).length,
        receipts: receipts(summary, waited),
        untilReceipts: untilSettled,
      };
    });
  } finally {
    await receiver.close();
  }
}

/**
 * Scenario `webhooks-hanging`: organization A's endpoint never answers (the receiver holds the
 * socket), B's answers at once; each sends SMS at `webhookRatePerS` for the scenario's duration,
 * the worker's webhook settings at their defaults. Reports B's event → receipt latency and what
 * the receiver and the service's own tables show of A's attempts.
 */
export async function webhooksHangingScenario(settings: Settings): Promise<WebhooksHangingResult> {
  const receiver = await startWebhookReceiver();
  try {
    return await withStack("whhang", webhookEnv(settings, receiver), async (stack) => {
      const [a, b] = stack.organizations;
      if (!a || !b) throw new Error("two organizations needed");
      const hangingPath = `${HANGING_PREFIX}${a.id}`;
      const healthyPath = `/${b.id}`;
      const base = `http://127.0.0.1:${receiver.port}`;
      const secrets = {
        [hangingPath]: await createEndpoint(stack, a.apiKey, `${base}${hangingPath}`),
        [healthyPath]: await createEndpoint(stack, b.apiKey, `${base}${healthyPath}`),
      };
      await receiver.setSecrets(secrets);
      await stack.startWorker();

      const rate = settings.webhookRatePerS;
      const sender = (apiKey: string, amount: number) =>
        load({
          url: `${stack.base}/api/v1/notifications/sms`,
          method: "POST",
          connections: 10,
          headers: { "content-type": "application/json", "x-api-key": apiKey },
          body: smsBody(),
          amount,
          overallRate: rate,
          expectedStatus: 202,
        });
      // Warm up with B alone (A's endpoint would start hanging before the window), let it finish.
      await sender(b.apiKey, Math.max(1, Math.round(rate * settings.warmupS)));
      await waitUntilFinished(stack.sql, 60_000);

      const processes = () => ({ web: stack.web, worker: stack.worker, database: stack.databaseName });
      const monitor = new RssMonitor(processes);
      const cpuNow = () => cpuSnapshot({ ...processes(), receiver });
      const before = cpuNow();
      const since = new Date();
      const amount = Math.round(rate * settings.durationS);
      const [hangingAccept, healthyAccept] = await Promise.all([
        sender(a.apiKey, amount),
        sender(b.apiKey, amount),
      ]);
      const allFinal = await waitUntilFinished(stack.sql, 60_000);
      const cpu = cpuDelta(before, cpuNow());
      const settling = Date.now();
      const waited = await awaitReceipts(stack, receiver, since, b.id);
      const cpuSettled = cpuDelta(before, cpuNow());
      const waitS = Math.round((Date.now() - settling) / 100) / 10;
      monitor.stop();
      const summary = await receiver.summary();

      const [aFinal] = await stack.sql<Array<{ n: number }>>`
        select count(*)::int as n from message_events f
        join message_events acc on acc.message_id = f.message_id and acc.type = 'accepted' and acc.occurred_at >= ${since}
        join messages m on m.message_id = f.message_id
        where f.type in ('success', 'failed', 'rejected') and m.organization_id = ${a.id}`;
      const attempts = await stack.sql<Array<{ outcome: string; n: number }>>`
        select coalesce(t.error_class, 'ok') as outcome, count(*)::int as n
        from webhook_attempts t join webhook_endpoints e on e.id = t.endpoint_id
        where e.organization_id = ${a.id} group by 1 order by 1`;
      const [left] = await stack.sql<Array<{ n: number }>>`
        select count(*)::int as n from webhook_deliveries d join webhook_endpoints e on e.id = d.endpoint_id
        where e.organization_id = ${a.id}`;
      // Release the worker's held attempts before the stack stops it.
      await receiver.close();
      const accepted = (hangingAccept.statuses["202"] ?? 0) + (healthyAccept.statuses["202"] ?? 0);
      return {
        durationS: settings.durationS,
        ratePerS: rate,
        accept: { hanging: hangingAccept, healthy: healthyAccept },
        allFinalWithinBound: allFinal,
        healthy: receipts(summary, waited),
        hanging: {
          ...summary.hanging,
          finalEvents: aFinal?.n ?? 0,
          attemptsRecorded: Object.fromEntries(attempts.map((row) => [row.outcome, row.n])),
          deliveriesLeft: left?.n ?? 0,
        },
        cpuMs: cpu,
        cpuUsPerMessage: perRequest(cpu, accepted),
        untilReceipts: { waitS, cpuMs: cpuSettled, cpuUsPerMessage: perRequest(cpuSettled, accepted) },
        peakRss: monitor.peak,
      };
    });
  } finally {
    await receiver.close();
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
