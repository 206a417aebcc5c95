import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { Redis } from "ioredis";
import postgres from "postgres";
import { acceptBatchScenario } from "./lib/batch.js";
import { endToEndClusterScenario } from "./lib/cluster.js";
import { noisyNeighbourScenario } from "./lib/noisy-neighbour.js";
import { noisyTemplatesScenario } from "./lib/noisy-templates.js";
import { type BenchReport, renderMarkdown } from "./lib/report.js";
import {
  acceptScenario,
  ceilingScenario,
  endToEndAndReadScenario,
  priorityScenario,
  type Settings,
} from "./lib/scenarios.js";
import { closeOpenStacks } from "./lib/stack.js";
import { gitRevision, loadAverage, machineInfo, packageVersions } from "./lib/system.js";
import { endToEndWebhooksScenario, webhooksHangingScenario } from "./lib/webhooks.js";

/**
 * `npm run bench`: builds, then runs the Procfile's web and worker against a fresh database and
 * BullMQ prefix per scenario, drives them over HTTP with autocannon and writes
 * bench/results/<date>.json and .md. Options:
 *   --only ceiling,accept-64,accept-64-senders-off,accept-64-idempotent,accept-64-worker,accept-256,
 *          accept-batch,e2e,e2e-webhooks,webhooks-hanging,e2e-cluster,read,priority,noisy-templates,
 *          noisy-neighbour
 *          (default: all; e2e-webhooks and e2e-cluster run e2e twice beside their own two runs,
 *          interleaved: their targets are ratios to e2e's figures, bench/lib/interleaved.ts)
 *   --duration 15   --warmup 3   --label name   --env KEY=VALUE (repeatable, for web and worker)
 *   --e2e-messages 20000   --flood 50000   --otp 500   --webhook-rate 200 (per organization, webhooks-hanging)
 *   --profile   (web and worker run with --cpu-prof; see bench/profile-summary.ts)
 *   --suppressions 100000  (entries on the suppression list before each scenario; default 0)
 *   --past-days 90  (day partitions of both tables made back to that day, as retention keeps them; default 0)
 * BENCH_APP_DIR=<a built checkout> runs that service instead of this one (a "before" baseline).
 */
const SCENARIOS = [
  "ceiling",
  "accept-64",
  "accept-64-senders-off",
  "accept-64-idempotent",
  "accept-64-worker",
  "accept-256",
  "accept-batch",
  "e2e",
  "e2e-webhooks",
  "webhooks-hanging",
  "e2e-cluster",
  "read",
  "priority",
  "noisy-templates",
  "noisy-neighbour",
] as const;
type ScenarioId = (typeof SCENARIOS)[number];
/** A hard bound on the whole run: whatever hangs, the processes are stopped and the data removed. */
const RUN_DEADLINE_MS = 30 * 60 * 1000;

const { values } = parseArgs({
  options: {
    only: { type: "string" },
    duration: { type: "string", default: "15" },
    warmup: { type: "string", default: "3" },
    label: { type: "string", default: "" },
    env: { type: "string", multiple: true, default: [] },
    "e2e-messages": { type: "string", default: "20000" },
    flood: { type: "string", default: "50000" },
    otp: { type: "string", default: "500" },
    "webhook-rate": { type: "string", default: "200" },
    suppressions: { type: "string", default: "0" },
    "past-days": { type: "string", default: "0" },
    profile: { type: "boolean", default: false },
  },
});

const selected = new Set<ScenarioId>(
  values.only ? (values.only.split(",").map((s) => s.trim()) as ScenarioId[]) : SCENARIOS,
);
for (const id of selected) {
  if (!SCENARIOS.includes(id)) throw new Error(`unknown scenario ${id}; known: ${SCENARIOS.join(", ")}`);
}

const log = (line: string) => console.log(`[bench ${new Date().toISOString().slice(11, 19)}] ${line}`);
const settings: Settings = {
  postgresUrl: process.env.BENCH_DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/postgres",
  redisUrl: process.env.REDIS_URL ?? "redis://127.0.0.1:6379",
  env: Object.fromEntries(
    values.env.map((pair) => {
      const at = pair.indexOf("=");
      return [pair.slice(0, at), pair.slice(at + 1)];
    }),
  ),
  log,
  profileDir: values.profile ? join(import.meta.dirname, "results", "profiles", `${Date.now()}`) : undefined,
  durationS: Number(values.duration),
  warmupS: Number(values.warmup),
  e2eMessages: Number(values["e2e-messages"]),
  floodMessages: Number(values.flood),
  otpMessages: Number(values.otp),
  otpRatePerS: 50,
  webhookRatePerS: Number(values["webhook-rate"]),
  suppressions: Number(values.suppressions),
  pastDays: Number(values["past-days"]),
};

async function serverVersions(): Promise<Record<string, string>> {
  const sql = postgres(settings.postgresUrl, { max: 1, onnotice: () => {} });
  const redis = new Redis(settings.redisUrl, { maxRetriesPerRequest: 3 });
  try {
    const [pg] = await sql<Array<{ server_version: string; synchronous_commit: string }>>`
      select current_setting('server_version') as server_version,
             current_setting('synchronous_commit') as synchronous_commit`;
    const info = await redis.info("server");
    return {
      postgres: pg?.server_version ?? "unknown",
      synchronous_commit: pg?.synchronous_commit ?? "unknown",
      redis: /redis_version:(\S+)/.exec(info)?.[1] ?? "unknown",
    };
  } finally {
    await sql.end();
    redis.disconnect();
  }
}

async function main(): Promise<void> {
  const startedAt = new Date();
  const report: BenchReport = {
    date: startedAt.toISOString(),
    label: values.label,
    command: `npm run bench -- ${process.argv.slice(2).join(" ")}`.trim(),
    revision: gitRevision(process.env.BENCH_APP_DIR),
    machine: machineInfo(),
    versions: { ...packageVersions(), ...(await serverVersions()) },
    settings: {
      durationS: settings.durationS,
      warmupS: settings.warmupS,
      env: settings.env,
      e2eMessages: settings.e2eMessages,
      floodMessages: settings.floodMessages,
      otpMessages: settings.otpMessages,
      otpRatePerS: settings.otpRatePerS,
      ...(selected.has("webhooks-hanging") ? { webhookRatePerS: settings.webhookRatePerS } : {}),
      ...(settings.suppressions ? { suppressions: settings.suppressions } : {}),
      ...(settings.pastDays ? { pastDays: settings.pastDays } : {}),
    },
    results: {},
    loadAverageAtEnd: [],
  };

  const run = async <T>(id: ScenarioId, body: () => Promise<T>): Promise<T | undefined> => {
    if (!selected.has(id)) return undefined;
    log(`${id}: starting (load average ${loadAverage().join(" ")})`);
    const result = await body();
    log(`${id}: ${JSON.stringify(result)}`);
    return result;
  };

  report.results.ceiling = await run("ceiling", () => ceilingScenario(settings, 64));
  report.results.accept64 = await run("accept-64", () =>
    acceptScenario(settings, { connections: 64, withWorker: false }),
  );
  report.results.accept64SendersOff = await run("accept-64-senders-off", () =>
    acceptScenario(settings, { connections: 64, withWorker: false, sendersOff: true }),
  );
  report.results.accept64Idempotent = await run("accept-64-idempotent", () =>
    acceptScenario(settings, { connections: 64, withWorker: false, idempotencyKeys: true }),
  );
  report.results.accept64Worker = await run("accept-64-worker", () =>
    acceptScenario(settings, { connections: 64, withWorker: true }),
  );
  report.results.accept256 = await run("accept-256", () =>
    acceptScenario(settings, { connections: 256, withWorker: false }),
  );
  report.results.acceptBatch = await run("accept-batch", () => acceptBatchScenario(settings));
  if (selected.has("e2e") || selected.has("read")) {
    log(`e2e${selected.has("read") ? " + read" : ""}: starting (load average ${loadAverage().join(" ")})`);
    const { endToEnd, read } = await endToEndAndReadScenario(settings, selected.has("read"));
    log(`e2e: ${JSON.stringify(endToEnd)}`);
    if (read) log(`read: ${JSON.stringify(read)}`);
    report.results.endToEnd = endToEnd;
    report.results.read = read;
  }
  report.results.endToEndWebhooks = await run("e2e-webhooks", () => endToEndWebhooksScenario(settings));
  report.results.webhooksHanging = await run("webhooks-hanging", () => webhooksHangingScenario(settings));
  report.results.endToEndCluster = await run("e2e-cluster", () => endToEndClusterScenario(settings));
  report.results.priority = await run("priority", () => priorityScenario(settings));
  report.results.noisyTemplates = await run("noisy-templates", () => noisyTemplatesScenario(settings));
  report.results.noisyNeighbour = await run("noisy-neighbour", () => noisyNeighbourScenario(settings));
  report.loadAverageAtEnd = loadAverage();

  const directory = join(import.meta.dirname, "results");
  mkdirSync(directory, { recursive: true });
  const stamp = startedAt.toISOString().replace(/[:.]/g, "-").slice(0, 19);
  const name = `${stamp}${values.label ? `-${values.label}` : ""}`;
  const markdown = renderMarkdown(report);
  writeFileSync(join(directory, `${name}.json`), `${JSON.stringify(report, null, 2)}\n`);
  writeFileSync(join(directory, `${name}.md`), markdown);
  console.log(`\n${markdown}`);
  log(`wrote bench/results/${name}.json and .md`);
}

const deadline = setTimeout(() => {
  console.error(`the benchmark ran past ${RUN_DEADLINE_MS / 60000} minutes; stopping`);
  void closeOpenStacks(30_000).finally(() => process.exit(2));
}, RUN_DEADLINE_MS);
deadline.unref();

for (const signal of ["SIGINT", "SIGTERM"] as const) {
  process.once(signal, () => {
    console.error(`${signal}: stopping the processes and removing the benchmark's data`);
    void closeOpenStacks(30_000).finally(() => process.exit(130));
  });
}

main().then(
  () => process.exit(0),
  (error: unknown) => {
    console.error(error);
    void closeOpenStacks(30_000).finally(() => process.exit(1));
  },
);
