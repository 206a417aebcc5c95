import { type ChildProcess, spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import { readFileSync } from "node:fs";
import { createServer } from "node:net";
import { join } from "node:path";
import { createDatabase } from "../../db/client.js";
import { dropDatabase } from "../../db/migrate.js";
import { createTemplate } from "../../src/channels/email/templates/store.js";
import { TEST_CONTENT_KEYS } from "./content-keys.js";
import { GENEROUS_LIMITS } from "./limits.js";

const root = join(import.meta.dirname, "..", "..");

/** The Procfile's process types and their commands, exactly as written there. */
export function procfile(): Record<string, string> {
  const lines = readFileSync(join(root, "Procfile"), "utf8").split("\n");
  const entries = lines.map((line) => /^([a-z]+):\s*(.+)$/.exec(line.trim())).filter((m) => m !== null);
  return Object.fromEntries(entries.map((m) => [m[1], m[2]]));
}

export async function freePort(): Promise<number> {
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

export interface RunningProcess {
  child: ChildProcess;
  output: () => string;
  /** Sends a signal and resolves with the exit code once the process is gone. */
  stop: (signal?: NodeJS.Signals) => Promise<number | null>;
  exited: Promise<number | null>;
}

/**
 * Runs a Procfile command through the shell, as a platform would, from the project root, with the
 * per-organization limits out of the way unless `env` sets them.
 */
export function runProcess(command: string, env: Record<string, string>): RunningProcess {
  const child = spawn("sh", ["-c", `exec ${command}`], {
    cwd: root,
    // A master key of the tests' own, as production needs one (docs/decisions/0034).
    env: {
      ...TEST_CONTENT_KEYS,
      WEBHOOK_SECRET_KEY: Buffer.alloc(32, 8).toString("base64"),
      ...process.env,
      ...GENEROUS_LIMITS,
      ...env,
    },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  child.stdout?.on("data", (chunk: Buffer) => {
    output += chunk.toString();
  });
  child.stderr?.on("data", (chunk: Buffer) => {
    output += chunk.toString();
  });
  const exited = new Promise<number | null>((resolve) => child.on("exit", (code) => resolve(code)));
  return {
    child,
    output: () => output,
    exited,
    stop: async (signal = "SIGTERM") => {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
      return exited;
    },
  };
}

/** Waits (at most `timeoutMs`) until the Procfile's `bounces` process says its listener is up. */
export async function bouncesListening(bounces: RunningProcess, timeoutMs = 15_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!bounces.output().includes("bounces SMTP listener")) {
    if (Date.now() > deadline)
      throw new Error(`the bounces process did not listen within ${timeoutMs} ms:\n${bounces.output()}`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

export async function waitForHttp(url: string, timeoutMs = 15_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      const response = await fetch(url);
      if (response.ok) return;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) throw new Error(`${url} did not answer within ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

export interface ProcfileStack {
  /** e.g. "http://127.0.0.1:41234": the web process. */
  base: string;
  /** The stack's own database. */
  databaseUrl: string;
  web: RunningProcess;
  worker: RunningProcess;
  /** Kills what still runs and drops the stack's database. */
  close(): Promise<void>;
}

/**
 * The Procfile's release, web and worker, built and run exactly as written, against a database
 * of its own that does not exist yet (release creates and migrates it) and a queue prefix of its own.
 */
export async function startProcfileStack(baseDatabaseUrl: string, extraEnv: Record<string, string> = {}) {
  const databaseUrl = new URL(baseDatabaseUrl);
  databaseUrl.pathname = `/ntf_e2e_${randomUUID().slice(0, 8)}`;
  // A PORT of the caller's: it had to know the web process's address first (PUBLIC_BASE_URL).
  const port = extraEnv.PORT ? Number(extraEnv.PORT) : await freePort();
  const env = {
    DATABASE_URL: databaseUrl.toString(),
    REDIS_URL: process.env.REDIS_URL ?? "redis://127.0.0.1:6379",
    PORT: String(port),
    QUEUE_PREFIX: `e2e-${randomUUID().slice(0, 8)}`,
    RETRY_BASE_DELAY_MS: "20",
    LOG_LEVEL: "warn",
    WORKER_METRICS_PORT: "0",
    ...extraEnv,
  };
  const commands = procfile();
  const release = runProcess(commands.release ?? "missing-release", env);
  const releaseCode = await release.exited;
  if (releaseCode !== 0) throw new Error(`release exited ${releaseCode}:\n${release.output()}`);
  const web = runProcess(commands.web ?? "missing-web", env);
  const worker = runProcess(commands.worker ?? "missing-worker", env);
  const base = `http://127.0.0.1:${port}`;
  await waitForHttp(`${base}/healthz`);
  return {
    base,
    databaseUrl: databaseUrl.toString(),
    web,
    worker,
    async close() {
      await Promise.all([web.stop("SIGKILL"), worker.stop("SIGKILL")]);
      await dropDatabase(databaseUrl.toString());
    },
  } satisfies ProcfileStack;
}

/**
 * Stores a template straight into a stack's database, past the API's save check (decision 0029):
 * one saved before that check existed, or one slow only with a send's real data.
 */
export async function storeTemplateIn(
  stack: Pick<ProcfileStack, "databaseUrl">,
  organizationId: string,
  template: { name: string; code: string },
): Promise<void> {
  const { db, sql } = createDatabase({ url: stack.databaseUrl, poolSize: 1 });
  try {
    await createTemplate(db, organizationId, { ...template, text: null }, new Date());
  } finally {
    await sql.end({ timeout: 5 });
  }
}
