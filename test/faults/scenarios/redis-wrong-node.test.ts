import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { freePort, procfile, type RunningProcess, runProcess } from "../../support/processes.js";
import { RedisServer } from "../support/redis-server.js";
import { waitFor } from "../support/scenario.js";

/**
 * Issue 21: a Redis the service cannot work with (a Cluster node, a read-only replica, one that
 * refuses the login) stops the web and worker processes at start with one message naming
 * REDIS_URL (issue 18: or the cluster or Sentinel setting at fault), instead of running and failing every queue command (a Cluster node as REDIS_URL
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

async function env(redis: string | Record<string, string>): Promise<Record<string, string>> {
  return {
    NODE_ENV: "test",
    LOG_LEVEL: "info",
    DATABASE_URL: inject("databaseUrl"),
    ...(typeof redis === "string" ? { REDIS_URL: redis } : { REDIS_URL: "", ...redis }),
    PORT: String(await freePort()),
    WORKER_METRICS_PORT: "0",
  };
}

/** Runs a Procfile process that should refuse to start: its exit code and what it printed. */
async function refusedStart(name: "web" | "worker", redis: string | Record<string, string>) {
  const started: RunningProcess = runProcess(procfile()[name] as string, await env(redis));
  const timeout = setTimeout(() => void started.stop("SIGKILL"), 15_000);
  const code = await started.exited;
  clearTimeout(timeout);
  return { code, output: started.output() };
}

const cases: Array<{
  what: string;
  redis: () => string | Record<string, string>;
  names: string;
  says: string;
}> = [
  {
    what: "a Redis Cluster node as REDIS_URL",
    redis: () => clusterNode.url,
    names: "REDIS_URL: Redis at 127.0.0.1:",
    says: "is a Redis Cluster node",
  },
  {
    what: "a read-only replica as REDIS_URL",
    redis: () => replica.url,
    names: "REDIS_URL: Redis at 127.0.0.1:",
    says: "is a read-only replica",
  },
  {
    what: "a Redis that wants a password as REDIS_URL",
    redis: () => guarded.url,
    names: "REDIS_URL: Redis at 127.0.0.1:",
    says: "refused the login (NOAUTH)",
  },
  {
    what: "a wrong password in REDIS_URL",
    redis: () => `redis://:not-the-password@127.0.0.1:${guarded.port}`,
    names: "REDIS_URL: Redis at 127.0.0.1:",
    says: "refused the login (WRONGPASS)",
  },
  // Issue 18: the cluster and Sentinel settings (decision 0041).
  {
    what: "a standalone Redis as REDIS_CLUSTER_NODES",
    redis: () => ({ REDIS_CLUSTER_NODES: `127.0.0.1:${primary.port}` }),
    names: "REDIS_CLUSTER_NODES: Redis at 127.0.0.1:",
    says: "is not a Redis Cluster node",
  },
  {
    what: "a data node as REDIS_SENTINELS",
    redis: () => ({ REDIS_SENTINELS: `127.0.0.1:${primary.port}`, REDIS_SENTINEL_NAME: "mymaster" }),
    names: "REDIS_SENTINELS: Redis at 127.0.0.1:",
    says: "is not a Sentinel",
  },
  {
    what: "cluster nodes and Sentinels together",
    redis: () => ({ REDIS_CLUSTER_NODES: "127.0.0.1:7000", REDIS_SENTINELS: "127.0.0.1:26379" }),
    names: "REDIS_CLUSTER_NODES / REDIS_SENTINELS:",
    says: "set one or neither",
  },
  {
    what: "Sentinels without REDIS_SENTINEL_NAME",
    redis: () => ({ REDIS_SENTINELS: "127.0.0.1:26379" }),
    names: "REDIS_SENTINEL_NAME:",
    says: "required when REDIS_SENTINELS is set",
  },
  {
    what: "a wrong REDIS_PASSWORD for the cluster's nodes",
    redis: () => ({ REDIS_CLUSTER_NODES: `127.0.0.1:${guarded.port}`, REDIS_PASSWORD: "not-the-password" }),
    names: "REDIS_PASSWORD: Redis at 127.0.0.1:",
    says: "refused the login (WRONGPASS)",
  },
];

for (const { what, redis, names, says } of cases) {
  describe(`given ${what}`, () => {
    for (const name of ["web", "worker"] as const) {
      it(`the ${name} process stops at start with one message naming the setting`, async () => {
        const { code, output } = await refusedStart(name, redis());
        expect(code, output).toBe(1);
        expect(output).toContain(names);
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
