import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { freePort, procfile, type RunningProcess, runProcess } from "../../support/processes.js";
import { RedisServer } from "../support/redis-server.js";
import { waitFor } from "../support/scenario.js";

/**
 * Issue 21: a Redis the service cannot work with (a Cluster node, a read-only replica, one that
 * refuses the login) stops the web and worker processes at start with one message naming
 * REDIS_URL, instead of running and failing every queue command (a Cluster node as REDIS_URL
 * once gave 1.7 GB of logs in 80 s).
 */
const servers: RedisServer[] = [];
let primary: RedisServer;
let replica: RedisServer;
let clusterNode: RedisServer;
let guarded: RedisServer;

beforeAll(async () => {
  primary = await RedisServer.start();
  replica = await RedisServer.start({ args: ["--replicaof", "127.0.0.1", String(primary.port)] });
  const clusterPort = await freePort();
  clusterNode = await RedisServer.start({
    args: ["--cluster-enabled", "yes", "--cluster-config-file", join(tmpdir(), `nodes-${clusterPort}.conf`)],
  });
  guarded = await RedisServer.start({ args: ["--requirepass", "a-long-test-password"] });
  servers.push(primary, replica, clusterNode, guarded);
}, 60_000);

afterAll(async () => {
  await Promise.all(servers.map((server) => server.kill()));
});

async function env(redisUrl: string): Promise<Record<string, string>> {
  return {
    NODE_ENV: "test",
    LOG_LEVEL: "info",
    DATABASE_URL: inject("databaseUrl"),
    REDIS_URL: redisUrl,
    PORT: String(await freePort()),
    WORKER_METRICS_PORT: "0",
  };
}

/** Runs a Procfile process that should refuse to start: its exit code and what it printed. */
async function refusedStart(name: "web" | "worker", redisUrl: string) {
  const started: RunningProcess = runProcess(procfile()[name] as string, await env(redisUrl));
  const timeout = setTimeout(() => void started.stop("SIGKILL"), 15_000);
  const code = await started.exited;
  clearTimeout(timeout);
  return { code, output: started.output() };
}

const cases = [
  { what: "a Redis Cluster node", url: () => clusterNode.url, says: "is a Redis Cluster node" },
  { what: "a read-only replica", url: () => replica.url, says: "is a read-only replica" },
  { what: "a Redis that wants a password", url: () => guarded.url, says: "refused the login (NOAUTH)" },
  {
    what: "a wrong password",
    url: () => `redis://:not-the-password@127.0.0.1:${guarded.port}`,
    says: "refused the login (WRONGPASS)",
  },
];

for (const { what, url, says } of cases) {
  describe(`given ${what} as REDIS_URL`, () => {
    for (const name of ["web", "worker"] as const) {
      it(`the ${name} process stops at start with one message naming REDIS_URL`, async () => {
        const { code, output } = await refusedStart(name, url());
        expect(code, output).toBe(1);
        expect(output).toContain("REDIS_URL: Redis at 127.0.0.1:");
        expect(output).toContain(says);
        expect(output).not.toContain("not-the-password"); // no password in the message
        expect(output.trim().split("\n").length, output).toBeLessThanOrEqual(5);
      });
    }
  });
}

describe("given the right password in REDIS_URL", () => {
  it("the worker starts", async () => {
    const worker = runProcess(
      procfile().worker as string,
      await env(`redis://:a-long-test-password@127.0.0.1:${guarded.port}`),
    );
    try {
      await waitFor(() => worker.output().includes("delivery worker started") || undefined, 15_000, "start");
    } finally {
      await worker.stop("SIGTERM");
    }
    expect(worker.output()).not.toContain("REDIS_URL");
  });
});
