import type postgres from "postgres";
import { load } from "./load.js";
import { type Settings, waitUntilFinished, withStack } from "./scenarios.js";
import { BENCH_SENDER, type Stack } from "./stack.js";

/**
 * Scenario `noisy-neighbour` (issue 19): organization A posts 50,000 `medium` SMS at once
 * (batches of 500, 8 at a time); from its first batch on, organization B posts 500 `medium` SMS
 * at 50/s. The worker runs throughout. Runs on stacks of their own, one after the other: A alone
 * and A with B, with fairness (the default `QUEUE_WAITING_LIMIT`), twice, interleaved (on this
 * shared machine one run's drain time varies by a third: the ratio is of the two pairs' sums),
 * and once without fairness (`QUEUE_WAITING_LIMIT=0`: today's figure, A's backlog all in Redis in
 * front of B) between them. B's accept → success is the worse of the fair runs'; A's drain is its
 * first accepted message to its last final one.
 */
export interface NoisyNeighbourRun {
  waitingLimit: string;
  a: { messages: number; acceptedS: number; drainS: number; byStatus: Record<string, number> };
  b?: {
    messages: number;
    acceptToSuccessMs: { p50: number; p99: number; max: number };
    byStatus: Record<string, number>;
  };
}

export interface NoisyNeighbourResult {
  /** The fair run with B whose B fared worse. */
  fair: NoisyNeighbourRun;
  unfair: NoisyNeighbourRun;
  /** The first run of A alone (fair). */
  aloneFair: NoisyNeighbourRun;
  /** A's drain alone and with B, both fair, in the order they ran. */
  pairs: Array<{ aloneS: number; withBS: number }>;
  /** A's drains with B ÷ A's drains alone, both fair, summed over the pairs (the target: at most 1.10). */
  drainRatio: number;
}

const BATCH = 500;
const A_CONNECTIONS = 8;
const B_RATE_PER_S = 50;

export async function noisyNeighbourScenario(settings: Settings): Promise<NoisyNeighbourResult> {
  const messages = settings.floodMessages;
  const alone1 = await run(settings, "nna1", undefined, messages, false);
  const fair1 = await run(settings, "nnf1", undefined, messages, true);
  const unfair = await run(settings, "nnu", "0", messages, true);
  const fair2 = await run(settings, "nnf2", undefined, messages, true);
  const alone2 = await run(settings, "nna2", undefined, messages, false);
  const pairs = [
    { aloneS: alone1.a.drainS, withBS: fair1.a.drainS },
    { aloneS: alone2.a.drainS, withBS: fair2.a.drainS },
  ];
  const sum = (values: number[]) => values.reduce((total, value) => total + value, 0);
  const worse =
    (fair1.b?.acceptToSuccessMs.p99 ?? 0) >= (fair2.b?.acceptToSuccessMs.p99 ?? 0) ? fair1 : fair2;
  return {
    fair: worse,
    unfair,
    aloneFair: alone1,
    pairs,
    drainRatio: Math.round((sum(pairs.map((p) => p.withBS)) / sum(pairs.map((p) => p.aloneS))) * 100) / 100,
  };
}

async function run(
  settings: Settings,
  label: string,
  waitingLimit: string | undefined,
  messages: number,
  withB: boolean,
): Promise<NoisyNeighbourRun> {
  // A's 50,000 go "at once": its send rate may not spread them (the stack's 1,000 a second would).
  const env = {
    ...settings.env,
    SEND_RATE_LIMIT: "1000000",
    SEND_RATE_BURST: "1000000",
    ...(waitingLimit === undefined ? {} : { QUEUE_WAITING_LIMIT: waitingLimit }),
  };
  return withStack(label, { ...settings, env }, async (stack) => {
    const [a, b] = stack.organizations;
    if (!a || !b) throw new Error("the stack onboarded fewer than two organizations");
    await stack.startWorker();
    const since = new Date();
    const flood = floodOf(stack, a.apiKey, messages);
    // B starts once A's first batch is in: its messages meet A's backlog.
    await waitForAccepted(stack.sql, a.id, BATCH);
    const trickle = withB ? trickleOf(stack, b.apiKey, 500) : Promise.resolve();
    await Promise.all([flood, trickle]);
    const [accepted] = await stack.sql<Array<{ n: number }>>`
      select count(*)::int as n from messages where organization_id = ${a.id} and created_at >= ${since}`;
    if (accepted?.n !== messages)
      throw new Error(`${label}: A's batches accepted ${accepted?.n} of ${messages}`);
    if (!(await waitUntilFinished(stack.sql, 300_000, { pollMs: 500 })))
      throw new Error(`${label}: messages still unfinished 300 s after the last request`);
    return {
      waitingLimit: env.QUEUE_WAITING_LIMIT ?? "default",
      a: await drainOf(stack.sql, a.id, since),
      ...(withB ? { b: await latencyOf(stack.sql, b.id, since) } : {}),
    };
  });
}

/** A's messages, in batches of 500 posted by 8 connections. */
async function floodOf(stack: Stack, apiKey: string, messages: number): Promise<void> {
  const body = JSON.stringify(
    Array.from({ length: BATCH }, (_, i) => ({
      payload: {
        to: `+1415555${String(1000 + (i % 9000))}`,
        body: "Our spring sale starts now",
        sender: BENCH_SENDER,
      },
    })),
  );
  // Eight connections, each posting its next batch as soon as the last one is answered; every
  // item's result is read, so an item refused inside a 207 cannot pass for an accepted one.
  const batches = Math.ceil(messages / BATCH);
  const statuses: Record<string, number> = {};
  let next = 0;
  await Promise.all(
    Array.from({ length: A_CONNECTIONS }, async () => {
      while (next < batches) {
        next++;
        const response = await fetch(`${stack.base}/api/v1/notifications/sms/batch`, {
          method: "POST",
          headers: { "content-type": "application/json", "x-api-key": apiKey },
          body,
        });
        if (response.status !== 207) {
          statuses[`batch ${response.status}`] = (statuses[`batch ${response.status}`] ?? 0) + 1;
          continue;
        }
        const { results } = (await response.json()) as { results: Array<{ status: number; error?: string }> };
        for (const result of results) statuses[result.status] = (statuses[result.status] ?? 0) + 1;
      }
    }),
  );
  if ((statuses["202"] ?? 0) !== batches * BATCH)
    throw new Error(`A's batches: ${JSON.stringify(statuses)}, not ${batches * BATCH} accepted items`);
}

/** B's messages, one request each, at 50 a second. */
async function trickleOf(stack: Stack, apiKey: string, messages: number): Promise<void> {
  const result = await load({
    url: `${stack.base}/api/v1/notifications/sms`,
    method: "POST",
    connections: 4,
    amount: messages,
    overallRate: B_RATE_PER_S,
    headers: { "content-type": "application/json", "x-api-key": apiKey },
    body: JSON.stringify({
      payload: { to: "+14155550100", body: "Your code is 123456", sender: BENCH_SENDER },
    }),
    expectedStatus: 202,
  });
  if (result.errors > 0)
    throw new Error(`B's sends: ${result.errors} errors (${JSON.stringify(result.statuses)})`);
}

async function waitForAccepted(sql: postgres.Sql, organizationId: string, count: number): Promise<void> {
  const deadline = Date.now() + 60_000;
  while (Date.now() < deadline) {
    const [row] = await sql<Array<{ n: number }>>`
      select count(*)::int as n from messages where organization_id = ${organizationId}`;
    if ((row?.n ?? 0) >= count) return;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  throw new Error("A's first batch was not accepted within 60 s");
}

async function drainOf(
  sql: postgres.Sql,
  organizationId: string,
  since: Date,
): Promise<NoisyNeighbourRun["a"]> {
  const rows = await sql<Array<{ status: string; n: number; first: Date; last_accepted: Date; last: Date }>>`
    select m.status, count(*)::int as n, min(m.created_at) as first, max(m.created_at) as last_accepted,
           max(m.updated_at) as last
    from messages m where m.organization_id = ${organizationId} and m.created_at >= ${since}
    group by rollup(m.status)`;
  const total = rows.find((row) => row.status === null);
  if (!total) throw new Error("A has no messages");
  const seconds = (from: Date, to: Date) => Math.round((to.getTime() - from.getTime()) / 10) / 100;
  return {
    messages: total.n,
    acceptedS: seconds(total.first, total.last_accepted),
    drainS: seconds(total.first, total.last),
    byStatus: Object.fromEntries(rows.filter((row) => row.status !== null).map((row) => [row.status, row.n])),
  };
}

async function latencyOf(
  sql: postgres.Sql,
  organizationId: string,
  since: Date,
): Promise<NonNullable<NoisyNeighbourRun["b"]>> {
  const rows = await sql<Array<{ status: string; n: number; p50: number; p99: number; max: number }>>`
    select m.status, count(*)::int as n,
      percentile_cont(0.5) within group (order by extract(epoch from m.updated_at - m.created_at) * 1000) as p50,
      percentile_cont(0.99) within group (order by extract(epoch from m.updated_at - m.created_at) * 1000) as p99,
      max(extract(epoch from m.updated_at - m.created_at) * 1000) as max
    from messages m where m.organization_id = ${organizationId} and m.created_at >= ${since}
    group by rollup(m.status)`;
  const total = rows.find((row) => row.status === null);
  const round = (v: number | undefined) => Math.round(Number(v ?? Number.NaN) * 10) / 10;
  return {
    messages: total?.n ?? 0,
    acceptToSuccessMs: { p50: round(total?.p50), p99: round(total?.p99), max: round(total?.max) },
    byStatus: Object.fromEntries(rows.filter((row) => row.status !== null).map((row) => [row.status, row.n])),
  };
}
