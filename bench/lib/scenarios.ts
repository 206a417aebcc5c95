import type postgres from "postgres";
import { PARTITION_READY_RECHECK_MS } from "../../workers/delivery-store.js";
import { type CpuUsage, cpuDelta, cpuSnapshot, type LoadResult, load, RssMonitor } from "./load.js";
import {
  BENCH_SENDER,
  type BenchProcess,
  benchRoot,
  Stack,
  type StackOptions,
  startProcess,
  waitFor,
} from "./stack.js";

export interface Settings extends StackOptions {
  durationS: number;
  warmupS: number;
  e2eMessages: number;
  floodMessages: number;
  otpMessages: number;
  otpRatePerS: number;
  /** Messages per second each organization sends in scenario webhooks-hanging. */
  webhookRatePerS: number;
}

const SMS_PATH = "/api/v1/notifications/sms";
export const smsBody = (notificationType?: string) =>
  JSON.stringify({
    payload: { to: "+14155550100", body: "Your code is 123456", sender: BENCH_SENDER },
    ...(notificationType ? { notification_type: notificationType } : {}),
  });

export interface PeakRss {
  webTotalMiB: number;
  webLargestMiB: number;
  workerMiB: number;
}

export interface LoadScenarioResult extends LoadResult {
  connections: number;
  cpuMs: CpuUsage;
  /** CPU microseconds per request, by component (postgres and redis machine-wide). */
  cpuUsPerRequest: Record<string, number>;
  peakRss: PeakRss;
}

export function perRequest(cpu: CpuUsage, requests: number): Record<string, number> {
  const per = (ms: number) => Math.round((ms * 1000) / Math.max(1, requests));
  return {
    web: per(cpu.web),
    worker: per(cpu.worker),
    postgres: per(cpu.postgres),
    redis: per(cpu.redis),
    loadGenerator: per(cpu.loadGenerator),
    machine: per(cpu.machineBusy),
    ...(cpu.receiver === undefined ? {} : { receiver: per(cpu.receiver) }),
    ...(cpu.postgresOwn === undefined ? {} : { postgresOwn: per(cpu.postgresOwn) }),
  };
}

async function measured(
  processes: () => { web?: BenchProcess; worker?: BenchProcess; database?: string },
  connections: number,
  run: () => Promise<LoadResult>,
): Promise<LoadScenarioResult> {
  const monitor = new RssMonitor(processes);
  const before = cpuSnapshot(processes());
  const result = await run();
  const cpu = cpuDelta(before, cpuSnapshot(processes()));
  monitor.stop();
  return {
    ...result,
    connections,
    cpuMs: cpu,
    cpuUsPerRequest: perRequest(cpu, result.requests),
    peakRss: monitor.peak,
  };
}

export async function withStack<T>(
  label: string,
  settings: Settings,
  body: (stack: Stack) => Promise<T>,
): Promise<T> {
  const stack = new Stack(label, settings);
  try {
    await stack.start();
    return await body(stack);
  } catch (error) {
    settings.log(
      `web output:\n${stack.web?.output() ?? ""}\nworker output:\n${stack.worker?.output() ?? ""}`,
    );
    throw error;
  } finally {
    await stack.close();
  }
}

/** One measured load of `request` against the stack's web (worker stopped or not), CPU by process. */
export function measuredLoad(
  stack: Stack,
  connections: number,
  request: Parameters<typeof load>[0],
  durationS: number,
): Promise<LoadScenarioResult> {
  return measured(
    () => ({ web: stack.web, worker: stack.worker, database: stack.databaseName }),
    connections,
    () => load({ ...request, duration: durationS }),
  );
}

/**
 * POST /notifications/sms; each connection sends as one organization, taken round robin. With
 * `idempotencyKeys`, every request carries an `Idempotency-Key` of its own (autocannon puts a
 * unique id in place of `[<id>]`), as a client that retries safely sends them.
 */
function postSms(stack: Stack, options: { connections: number; body: string; idempotencyKeys?: boolean }) {
  let next = 0;
  const keyHeader: Record<string, string> = options.idempotencyKeys
    ? { "idempotency-key": "bench-[<id>]" }
    : {};
  return {
    url: `${stack.base}${SMS_PATH}`,
    method: "POST",
    connections: options.connections,
    idReplacement: options.idempotencyKeys ?? false,
    headers: { "content-type": "application/json", "x-api-key": stack.apiKey, ...keyHeader },
    body: options.body,
    setupClient: (client: { setHeaders: (headers: Record<string, string>) => void }) => {
      const organization = stack.organizations[next++ % stack.organizations.length];
      client.setHeaders({
        "content-type": "application/json",
        "x-api-key": organization?.apiKey ?? "",
        ...keyHeader,
      });
    },
    expectedStatus: 202,
  };
}

/**
 * Scenario 1: POST /notifications/sms at a fixed number of connections. `sendersOff` runs it with
 * `SENDER_VERIFICATION=off`: against the same scenario with the check on (the production
 * default), what the check of the sender costs.
 */
export async function acceptScenario(
  settings: Settings,
  options: { connections: number; withWorker: boolean; idempotencyKeys?: boolean; sendersOff?: boolean },
): Promise<LoadScenarioResult> {
  const label = `accept${options.connections}${options.withWorker ? "w" : ""}${options.idempotencyKeys ? "i" : ""}${options.sendersOff ? "o" : ""}`;
  const env = options.sendersOff ? { ...settings.env, SENDER_VERIFICATION: "off" } : settings.env;
  return withStack(label, { ...settings, env }, async (stack) => {
    if (options.withWorker) await stack.startWorker();
    const request = postSms(stack, {
      connections: options.connections,
      body: smsBody(),
      idempotencyKeys: options.idempotencyKeys,
    });
    await load({ ...request, duration: settings.warmupS });
    return measured(
      () => ({ web: stack.web, worker: stack.worker }),
      options.connections,
      () => load({ ...request, duration: settings.durationS }),
    );
  });
}

/** Scenario 2: the minimal insert-then-enqueue handler of bench/ceiling-server.ts, loaded the same way. */
export async function ceilingScenario(settings: Settings, connections: number): Promise<LoadScenarioResult> {
  return withStack("ceiling", settings, async (stack) => {
    // The stack's web only onboarded; the ceiling server takes its place on the same database.
    await stack.web?.stop();
    const ceiling = startProcess(
      "ceiling",
      ["--import", "tsx", "bench/ceiling-server.ts"],
      {
        DATABASE_URL: stack.databaseUrl,
        REDIS_URL: settings.redisUrl,
        QUEUE_PREFIX: stack.prefix,
        PORT: String(stack.port),
        NODE_ENV: "production",
        ...settings.env,
      },
      benchRoot,
    );
    stack.web = ceiling;
    await waitFor(
      "the ceiling server",
      async () => {
        if (ceiling.child.exitCode !== null) throw new Error(`ceiling server exited:\n${ceiling.output()}`);
        return fetch(`${stack.base}/healthz`).then(
          (r) => r.ok,
          () => false,
        );
      },
      20_000,
    );
    const request = postSms(stack, { connections, body: smsBody() });
    await load({ ...request, duration: settings.warmupS });
    return measured(
      () => ({ web: ceiling }),
      connections,
      () => load({ ...request, duration: settings.durationS }),
    );
  });
}

interface FinalLatency {
  messages: number;
  byStatus: Record<string, number>;
  acceptToFinalMs: { p50: number; p99: number; max: number };
  /** accepted → the first attempt_started: time spent in the outbox and the queue. */
  acceptToFirstAttemptMs: { p50: number; p99: number };
  /** From the first accepted event to the last final event. */
  spanS: number;
  /** From the first accepted event to the last accepted event. */
  acceptSpanS: number;
}

/** accept → final latency from the events themselves (occurred_at of accepted vs the final event). */
async function finalLatency(
  sql: postgres.Sql,
  since: Date,
  notificationType?: string,
  acceptedBefore?: Date,
): Promise<FinalLatency> {
  const rows = await sql<
    Array<{
      status: string;
      n: number;
      p50: number;
      p99: number;
      start_p50: number;
      start_p99: number;
      max: number;
      first: Date;
      last_accepted: Date;
      last: Date;
    }>
  >`
    with accepted as (
      select message_id, occurred_at from message_events
      where type = 'accepted' and occurred_at >= ${since}
        and (${acceptedBefore ?? null}::timestamptz is null or occurred_at < ${acceptedBefore ?? null})
        and (${notificationType ?? null}::text is null or data->>'notificationType' = ${notificationType ?? null})
    ), final as (
      select f.type as status, extract(epoch from f.occurred_at - a.occurred_at) * 1000 as ms,
             extract(epoch from s.occurred_at - a.occurred_at) * 1000 as start_ms,
             a.occurred_at as accepted_at, f.occurred_at as final_at
      from accepted a
      join message_events f on f.message_id = a.message_id
      join message_events s on s.message_id = a.message_id and s.seq = 2
      where f.type in ('success', 'failed', 'rejected')
    )
    select status, count(*)::int as n,
           percentile_cont(0.5) within group (order by ms) as p50,
           percentile_cont(0.99) within group (order by ms) as p99,
           percentile_cont(0.5) within group (order by start_ms) as start_p50,
           percentile_cont(0.99) within group (order by start_ms) as start_p99,
           max(ms) as max, min(accepted_at) as first, max(accepted_at) as last_accepted,
           max(final_at) as last
    from final group by rollup(status)`;
  const total = rows.find((r) => r.status === null);
  const round = (v: number | undefined) => Math.round(Number(v ?? Number.NaN) * 10) / 10;
  return {
    messages: total?.n ?? 0,
    byStatus: Object.fromEntries(rows.filter((r) => r.status !== null).map((r) => [r.status, r.n])),
    acceptToFinalMs: { p50: round(total?.p50), p99: round(total?.p99), max: round(total?.max) },
    acceptToFirstAttemptMs: { p50: round(total?.start_p50), p99: round(total?.start_p99) },
    spanS: total ? Math.round((total.last.getTime() - total.first.getTime()) / 10) / 100 : Number.NaN,
    acceptSpanS: total
      ? Math.round((total.last_accepted.getTime() - total.first.getTime()) / 10) / 100
      : Number.NaN,
  };
}

async function unfinished(sql: postgres.Sql, notificationType?: string): Promise<number> {
  const [row] = await sql<Array<{ n: number }>>`
    select count(*)::int as n from messages
    where status in ('accepted', 'pending')
      and (${notificationType ?? null}::text is null or notification_type = ${notificationType ?? null})`;
  return row?.n ?? 0;
}

/** Polls until every (such) message is final; false if some are not within `timeoutMs`. */
export async function waitUntilFinished(
  sql: postgres.Sql,
  timeoutMs: number,
  options: { notificationType?: string; pollMs?: number } = {},
): Promise<boolean> {
  const { notificationType, pollMs = 150 } = options;
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, pollMs));
    if ((await unfinished(sql, notificationType)) === 0) return true;
  }
  return false;
}

export interface EndToEndResult {
  messages: number;
  /** false: some were still unfinished 120 s after the last request (latencies cover the finished ones). */
  allFinalWithinBound: boolean;
  accept: LoadResult;
  /** From the first request to the moment the poll saw every message final (coarse: autocannon and the poll add up to ~1 s). */
  wallS: number;
  /** messages ÷ (last final event − first accepted event): the throughput, from the events' own times. */
  messagesPerS: number;
  /** messages ÷ (last accepted event − first accepted event). */
  acceptedPerS: number;
  events: FinalLatency;
  cpuMs: CpuUsage;
  cpuUsPerMessage: Record<string, number>;
  /**
   * Write-ahead log the Postgres server wrote per message over the same window (every database
   * of the server: read it on a quiet machine), in bytes: with the CPU, one primary's cost per message.
   */
  walBytesPerMessage: number;
  peakRss: PeakRss;
}

export interface ReadResult extends LoadScenarioResult {
  knownIds: number;
}

/**
 * The CPU of a window that goes on past the moment every message was final, to the end of a wait
 * (the webhook scenarios' wait for their receipts): the work that trails the messages, and, when
 * the wait runs to its bound, idle time too.
 */
export interface UntilSettled {
  /** Seconds from the moment every message was final to the end of the wait. */
  waitS: number;
  cpuMs: CpuUsage;
  cpuUsPerMessage: Record<string, number>;
}

/**
 * The measured part of scenario 3 (end to end) on a started stack: the worker started, 2,000
 * messages to warm up (let finish), then `e2eMessages` as fast as they are accepted, until every
 * one is final. The CPU per message is read then, as e2e reports it; `settle`, if given, runs
 * after that (the webhook scenario waits there for its receipts) and the CPU is read again at its
 * end (`untilSettled`). `receiver` adds the webhook receiver's CPU.
 */
export async function measureEndToEnd(
  stack: Stack,
  settings: Settings,
  options: { receiver?: { cpuMs: () => number }; settle?: (since: Date) => Promise<void> } = {},
): Promise<{ endToEnd: EndToEndResult; untilSettled?: UntilSettled }> {
  await stack.startWorker();
  const request = postSms(stack, { connections: 64, body: smsBody() });
  // Warm both processes up, then let the warm-up messages finish.
  await load({ ...request, amount: Math.min(2000, settings.e2eMessages) });
  await waitUntilFinished(stack.sql, 60_000);
  // A day's rows as a running service has them: counted by ANALYZE (the worker's own since
  // 2026-11-29, seconds into the day; autovacuum's before, minutes into it), so the worker's load
  // and the webhook claim's details read the day's tables by name once they ask again whether
  // they are ready (src/store/day-partitions.ts). Done here too so that builds from before compare
  // alike; a build from before that check gains nothing from the wait.
  await stack.sql`analyze message_events`;
  await stack.sql`analyze messages`;
  await new Promise((resolve) => setTimeout(resolve, PARTITION_READY_RECHECK_MS + 500));

  const processes = () => ({ web: stack.web, worker: stack.worker, database: stack.databaseName });
  const monitor = new RssMonitor(processes);
  const cpuNow = () => cpuSnapshot({ ...processes(), receiver: options.receiver });
  const walNow = async () =>
    (await stack.sql<Array<{ lsn: string }>>`select pg_current_wal_lsn()::text as lsn`)[0]?.lsn ?? "0/0";
  const walBefore = await walNow();
  const before = cpuNow();
  const since = new Date();
  const started = Date.now();
  const accept = await load({ ...request, amount: settings.e2eMessages });
  const allFinal = await waitUntilFinished(stack.sql, 120_000);
  const wallS = (Date.now() - started) / 1000;
  const cpu = cpuDelta(before, cpuNow());
  const [wal] = await stack.sql<Array<{ bytes: string }>>`
    select pg_wal_lsn_diff(${await walNow()}::pg_lsn, ${walBefore}::pg_lsn)::text as bytes`;
  let untilSettled: UntilSettled | undefined;
  if (options.settle) {
    const settling = Date.now();
    await options.settle(since);
    const cpuSettled = cpuDelta(before, cpuNow());
    untilSettled = {
      waitS: Math.round((Date.now() - settling) / 100) / 10,
      cpuMs: cpuSettled,
      cpuUsPerMessage: perRequest(cpuSettled, settings.e2eMessages),
    };
  }
  monitor.stop();
  const events = await finalLatency(stack.sql, since);
  const endToEnd: EndToEndResult = {
    messages: settings.e2eMessages,
    allFinalWithinBound: allFinal,
    accept,
    wallS: Math.round(wallS * 100) / 100,
    messagesPerS: Math.round(events.messages / events.spanS),
    acceptedPerS: Math.round(events.messages / events.acceptSpanS),
    events,
    cpuMs: cpu,
    cpuUsPerMessage: perRequest(cpu, settings.e2eMessages),
    walBytesPerMessage: Math.round(Number(wal?.bytes ?? 0) / settings.e2eMessages),
    peakRss: monitor.peak,
  };
  return { endToEnd, untilSettled };
}

/** Scenario 3 (end to end) and, on the same data, scenario 5 (read). */
export async function endToEndAndReadScenario(
  settings: Settings,
  runRead: boolean,
): Promise<{ endToEnd: EndToEndResult; read: ReadResult | undefined }> {
  return withStack("e2e", settings, async (stack) => {
    const { endToEnd } = await measureEndToEnd(stack, settings);
    const processes = () => ({ web: stack.web, worker: stack.worker, database: stack.databaseName });
    if (!runRead) return { endToEnd, read: undefined };

    const keyOf = new Map(stack.organizations.map((o) => [o.id, o.apiKey]));
    const known = (
      await stack.sql<Array<{ message_id: string; organization_id: string }>>`
        select message_id, organization_id from messages`
    ).map((r) => ({ path: `/api/v1/messages/${r.message_id}`, apiKey: keyOf.get(r.organization_id) ?? "" }));
    const readRequest = {
      url: stack.base,
      connections: 64,
      requests: [
        {
          setupRequest: (raw: { path?: string; headers?: Record<string, string> }) => {
            const pick = known[Math.floor(Math.random() * known.length)];
            return { ...raw, path: pick?.path, headers: { "x-api-key": pick?.apiKey ?? "" } };
          },
        },
      ],
      expectedStatus: 200,
    };
    await load({ ...readRequest, duration: settings.warmupS });
    const read = await measured(processes, 64, () => load({ ...readRequest, duration: settings.durationS }));
    return { endToEnd, read: { ...read, knownIds: known.length } };
  });
}

export interface PriorityResult {
  flood: { messages: number; accept: LoadResult };
  otp: {
    messages: number;
    ratePerS: number;
    accept: LoadResult;
    /** false: some OTPs were unfinished 60 s after the last one was sent. */
    allFinalWithinBound: boolean;
    events: FinalLatency;
    /**
     * The OTPs accepted before the last low message became final: the ones that really met the
     * flood (on a fast machine the flood can drain before the last OTPs are sent).
     */
    underFlood: FinalLatency;
  };
  /** Low messages still unfinished when the last OTP was accepted (> 0: the flood was still draining). */
  lowUnfinishedAtLastOtp: number;
  /** Seconds from the worker's start until the flood was drained, if it drained within the bound. */
  floodDrainS: number | null;
  peakRss: PeakRss;
}

/** Scenario 4: OTPs at a steady rate while a flood of low-priority messages drains. */
export async function priorityScenario(settings: Settings): Promise<PriorityResult> {
  return withStack("priority", settings, async (stack) => {
    const monitor = new RssMonitor(() => ({ web: stack.web, worker: stack.worker }));
    const flood = await load({
      ...postSms(stack, { connections: 64, body: smsBody("NEWS_UPDATE") }),
      amount: settings.floodMessages,
    });
    const workerStarted = Date.now();
    await stack.startWorker();
    await waitFor(
      "the first low message to be delivered",
      async () => (await stack.sql`select 1 from messages where status = 'success' limit 1`).length > 0,
      60_000,
    );
    const since = new Date();
    const otpAccept = await load({
      ...postSms(stack, { connections: 10, body: smsBody("OTP") }),
      amount: settings.otpMessages,
      overallRate: settings.otpRatePerS,
    });
    const lowUnfinishedAtLastOtp = await unfinished(stack.sql, "NEWS_UPDATE");
    const otpFinal = await waitUntilFinished(stack.sql, 60_000, { notificationType: "OTP", pollMs: 500 });
    const events = await finalLatency(stack.sql, since, "OTP");
    const drained = await waitUntilFinished(stack.sql, 240_000, {
      notificationType: "NEWS_UPDATE",
      pollMs: 500,
    });
    const floodDrainS = drained ? Math.round((Date.now() - workerStarted) / 100) / 10 : null;
    const [lastLow] = await stack.sql<Array<{ at: Date | null }>>`
      select max(updated_at) as at from messages where notification_type = 'NEWS_UPDATE'`;
    const underFlood = await finalLatency(stack.sql, since, "OTP", lastLow?.at ?? since);
    monitor.stop();
    return {
      flood: { messages: settings.floodMessages, accept: flood },
      otp: {
        messages: settings.otpMessages,
        ratePerS: settings.otpRatePerS,
        accept: otpAccept,
        allFinalWithinBound: otpFinal,
        events,
        underFlood,
      },
      lowUnfinishedAtLastOtp,
      floodDrainS,
      peakRss: monitor.peak,
    };
  });
}
