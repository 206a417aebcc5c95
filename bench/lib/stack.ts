import { type ChildProcess, spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import { readFileSync } from "node:fs";
import { createServer } from "node:net";
import { join } from "node:path";
import { Redis } from "ioredis";
import postgres from "postgres";
import { dropDatabase } from "../../db/migrate.js";
import { cpuMs, processTree, rssMiB } from "./system.js";

const benchRoot = join(import.meta.dirname, "..", "..");
/**
 * The built service the benchmark runs: this checkout, or BENCH_APP_DIR (e.g. a `git worktree`
 * of an older commit, built, to measure "before" with the same benchmark).
 */
const root = process.env.BENCH_APP_DIR ?? benchRoot;
const ONBOARDING_TOKEN = "bench-onboarding-token-0123456789";
/**
 * Organizations per stack. Load is spread over them (one key per connection, round robin) so the
 * per-organization send rate limit and daily quota (SEND_RATE_LIMIT, SEND_DAILY_QUOTA below, above
 * their defaults) stay in force, and their cost in the numbers, yet out of the way.
 */
const ORGANIZATIONS = 100;
/** Every stack not closed yet, so a run that overruns its deadline can still clean up. */
const openStacks = new Set<Stack>();

export interface StackOptions {
  /** Base URL of the Postgres server; each stack creates (and drops) a database of its own. */
  postgresUrl: string;
  redisUrl: string;
  /** Extra environment for web and worker (e.g. WEB_CONCURRENCY). */
  env: Record<string, string>;
  log: (line: string) => void;
  /** When set, web and worker run with `--cpu-prof` and write their profiles under this folder. */
  profileDir?: string;
  /** Entries put on the suppression list before each scenario, spread over the organizations (none: 0). */
  suppressions?: number;
  /**
   * Day partitions made before each scenario for the days from this many days ago to yesterday
   * (on a fresh database the migration makes today and the week ahead): a production database
   * keeps about 100 of each table at the default 90-day retention, and every statement that plans
   * them all costs that much more to plan. None: 0.
   */
  pastDays?: number;
}

/** A started process of the stack, with its output kept for diagnosis. */
export interface BenchProcess {
  name: string;
  child: ChildProcess;
  output: () => string;
  /** CPU milliseconds of the process and its children so far (live ones only). */
  cpuMs: () => number;
  /** Resident memory of the process tree: the sum, and the largest single process. */
  rss: () => { totalMiB: number; largestMiB: number };
  stop: () => Promise<void>;
}

/** A Procfile command's arguments after `node` (the benchmark runs exactly what the Procfile says). */
export function procfileArgs(name: "release" | "web" | "worker"): string[] {
  const line = readFileSync(join(root, "Procfile"), "utf8")
    .split("\n")
    .map((l) => /^([a-z]+):\s*(.+)$/.exec(l.trim()))
    .find((m) => m?.[1] === name);
  const words = line?.[2]?.split(/\s+/) ?? [];
  if (words[0] !== "node") throw new Error(`Procfile ${name}: expected "node …", found "${line?.[2] ?? ""}"`);
  return words.slice(1);
}

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.listen(0, "127.0.0.1", () => {
      const address = server.address();
      server.close(() =>
        typeof address === "object" && address ? resolve(address.port) : reject(new Error("no port")),
      );
    });
  });
}

function startProcess(
  name: string,
  args: string[],
  env: Record<string, string>,
  cwd: string = root,
): BenchProcess {
  const child = spawn(process.execPath, args, {
    cwd,
    env: { ...process.env, ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  const keep = (chunk: Buffer) => {
    output = (output + chunk.toString()).slice(-20_000);
  };
  child.stdout?.on("data", keep);
  child.stderr?.on("data", keep);
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  const pid = child.pid ?? -1;
  return {
    name,
    child,
    output: () => output,
    cpuMs: () => processTree(pid).reduce((sum, p) => sum + cpuMs(p), 0),
    rss: () => {
      const sizes = processTree(pid)
        .map(rssMiB)
        .filter((v) => v !== undefined);
      return { totalMiB: sizes.reduce((a, b) => a + b, 0), largestMiB: Math.max(0, ...sizes) };
    },
    stop: async () => {
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.kill("SIGTERM");
      const killer = setTimeout(() => child.kill("SIGKILL"), 15_000);
      await exited;
      clearTimeout(killer);
    },
  };
}

async function waitFor(what: string, check: () => Promise<boolean> | boolean, timeoutMs: number) {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/**
 * The Procfile's processes (release, web, worker, built from dist/) against a database and a
 * BullMQ prefix of their own, so a run never touches anyone else's data; `close` removes both.
 */
/** The SMS sender the benchmark's requests name, approved for every organization. */
export const BENCH_SENDER = "ACME";

export class Stack {
  readonly databaseUrl: string;
  /** The run's own database (its backends' CPU is reported apart from the machine's Postgres). */
  get databaseName(): string {
    return this.#databaseName;
  }
  readonly prefix: string;
  readonly sql: postgres.Sql;
  port = 0;
  /** One API key per onboarded organization (the send rate limit is per organization). */
  organizations: Array<{ id: string; apiKey: string }> = [];
  web: BenchProcess | undefined;
  worker: BenchProcess | undefined;
  readonly #options: StackOptions;
  readonly #databaseName: string;

  constructor(label: string, options: StackOptions) {
    this.#options = options;
    const id = `${Date.now().toString(36)}_${randomUUID().slice(0, 6)}`;
    this.#databaseName = `ntf_bench_${label.replace(/[^a-z0-9]/gi, "_")}_${id}`.toLowerCase();
    const url = new URL(options.postgresUrl);
    url.pathname = `/${this.#databaseName}`;
    this.databaseUrl = url.toString();
    this.prefix = `bench-${id}`;
    this.sql = postgres(this.databaseUrl, { max: 2, onnotice: () => {} });
    openStacks.add(this);
  }

  get base(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  #workerMetricsPort = 0;

  #env(): Record<string, string> {
    return {
      WORKER_METRICS_PORT: String(this.#workerMetricsPort),
      DATABASE_URL: this.databaseUrl,
      REDIS_URL: this.#options.redisUrl,
      QUEUE_PREFIX: this.prefix,
      PORT: String(this.port),
      NODE_ENV: "production",
      ONBOARDING_TOKEN,
      CONTENT_MASTER_KEY: Buffer.alloc(32, 11).toString("base64"),
      WEBHOOK_SECRET_KEY: Buffer.alloc(32, 12).toString("base64"),
      SMS_PROVIDER: "simulator",
      EMAIL_PROVIDER: "simulator",
      PUSH_PROVIDER: "simulator",
      LOG_LEVEL: "warn",
      SEND_RATE_LIMIT: "1000",
      SEND_DAILY_QUOTA: "100000000",
      ...this.#options.env,
    };
  }

  /** Runs the release process (creates and migrates the database), then starts web. */
  async start(): Promise<void> {
    this.port = await freePort();
    const release = startProcess("release", ["dist/db/migrate.js"], {
      ...this.#env(),
      NODE_ENV: "development",
    });
    const code = await new Promise<number | null>((resolve) => release.child.once("exit", resolve));
    if (code !== 0) throw new Error(`release failed (${code}):\n${release.output()}`);
    const pastDays = this.#options.pastDays ?? 0;
    if (pastDays > 0)
      await this.sql`select create_message_partitions(current_date - ${pastDays}::int, current_date - 1)`;
    this.#workerMetricsPort = await freePort();
    await this.startWeb();
    this.organizations = await this.#onboard(ORGANIZATIONS);
    await this.#approveSender(BENCH_SENDER);
    await this.#fillSuppressions(this.#options.suppressions ?? 0);
  }

  /**
   * Puts `count` entries on the suppression list (docs/decisions/0039), spread evenly over the
   * organizations and channels, none of them a recipient the scenarios send to (random blind
   * indexes of the same length): every message's check looks them up and finds nothing, as the
   * usual message does. A build from before the list (`BENCH_APP_DIR`) has no such table.
   */
  async #fillSuppressions(count: number): Promise<void> {
    if (count <= 0) return;
    const [table] = await this.sql<Array<{ exists: boolean }>>`
      select to_regclass('suppressions') is not null as exists`;
    if (!table?.exists) {
      this.#options.log(`--suppressions ${count}: this build has no suppression list; none added`);
      return;
    }
    const ids = this.organizations.map((organization) => organization.id);
    await this.sql`
      insert into suppressions (organization_id, channel, recipient_key, reason)
      select (${ids}::uuid[])[1 + i % ${ids.length}], (array['sms','email','push'])[1 + (i / ${ids.length}) % 3],
        md5(i::text || random()::text), 'manual'
      from generate_series(0, ${count - 1}) as i`;
    // Vacuumed now rather than by autovacuum during the measurement. No checkpoint: the pages
    // every scenario writes would then carry full-page images in the WAL (the end-to-end runs that
    // followed one spent about 25 % more Postgres CPU per message: bench/results/2026-11-25-suppressions-ab.md).
    await this.sql`vacuum analyze suppressions`;
    // And a pause, for the background writer to write the new pages out before the measurement.
    await new Promise((resolve) => setTimeout(resolve, 15_000));
    this.#options.log(`${count} suppression entries added`);
  }

  /**
   * Gives every organization `sender` as an approved SMS sender (what the operator's
   * `npm run senders -- approve` does), so the sends pass `SENDER_VERIFICATION=required`, the
   * production default, and the accept path pays for the check. A build from before verified
   * senders (`BENCH_APP_DIR`) has no such table and no check.
   */
  async #approveSender(sender: string): Promise<void> {
    const [table] = await this.sql<Array<{ exists: boolean }>>`
      select to_regclass('organization_senders') is not null as exists`;
    if (!table?.exists) return;
    const rows = this.organizations.map((organization) => ({
      id: randomUUID(),
      organization_id: organization.id,
      kind: "sms_sender",
      value: sender,
      status: "verified",
      created_at: new Date(),
      verified_at: new Date(),
    }));
    await this.sql`insert into organization_senders ${this.sql(rows)}`;
  }

  get apiKey(): string {
    return this.organizations[0]?.apiKey ?? "";
  }

  #nodeArgs(name: string): string[] {
    const dir = this.#options.profileDir;
    return dir ? ["--cpu-prof", `--cpu-prof-dir=${join(dir, name)}`] : [];
  }

  async startWeb(): Promise<void> {
    const web = startProcess("web", [...this.#nodeArgs("web"), ...procfileArgs("web")], this.#env());
    this.web = web;
    await waitFor(
      "web to answer /healthz",
      async () => {
        if (web.child.exitCode !== null) throw new Error(`web exited:\n${web.output()}`);
        try {
          return (await fetch(`${this.base}/healthz`)).ok;
        } catch {
          return false;
        }
      },
      20_000,
    );
  }

  async startWorker(): Promise<void> {
    const worker = startProcess("worker", [...this.#nodeArgs("worker"), ...procfileArgs("worker")], {
      ...this.#env(),
      LOG_LEVEL: "info",
    });
    this.worker = worker;
    await waitFor(
      "the worker to start",
      () => {
        if (worker.child.exitCode !== null) throw new Error(`worker exited:\n${worker.output()}`);
        return /worker started/.test(worker.output());
      },
      20_000,
    );
  }

  async stopWorker(): Promise<void> {
    await this.worker?.stop();
  }

  async #onboard(count: number): Promise<Array<{ id: string; apiKey: string }>> {
    const response = await fetch(`${this.base}/api/v1/onboarding/organizations/bench`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${ONBOARDING_TOKEN}` },
      body: JSON.stringify({
        organizations: Array.from({ length: count }, (_, i) => ({ name: `Bench ${i}`, active: true })),
      }),
    });
    if (response.status !== 201)
      throw new Error(`onboarding failed: ${response.status} ${await response.text()}`);
    const body = (await response.json()) as { organizations: Array<{ id: string; apiKey: string }> };
    return body.organizations.map(({ id, apiKey }) => ({ id, apiKey }));
  }

  /** Stops the processes, drops the database and deletes every Redis key under the prefix. */
  async close(): Promise<void> {
    openStacks.delete(this);
    await Promise.all([this.web?.stop(), this.worker?.stop()]);
    await this.sql.end({ timeout: 5 });
    await dropDatabase(this.databaseUrl);
    await deleteKeys(this.#options.redisUrl, `${this.prefix}:*`);
  }
}

export async function deleteKeys(redisUrl: string, pattern: string): Promise<void> {
  const redis = new Redis(redisUrl, { maxRetriesPerRequest: 3 });
  try {
    let cursor = "0";
    do {
      const [next, keys] = await redis.scan(cursor, "MATCH", pattern, "COUNT", 1000);
      cursor = next;
      if (keys.length > 0) await redis.unlink(...keys);
    } while (cursor !== "0");
  } finally {
    redis.disconnect();
  }
}

/** Closes whatever stacks are still open (a run past its deadline), giving up after `timeoutMs`. */
export async function closeOpenStacks(timeoutMs: number): Promise<void> {
  await Promise.race([
    Promise.allSettled([...openStacks].map((stack) => stack.close())),
    new Promise((resolve) => setTimeout(resolve, timeoutMs)),
  ]);
}

export { benchRoot, startProcess, waitFor };
