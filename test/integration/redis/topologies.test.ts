import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ConfigError, loadConfig } from "../../../src/runtime/config.js";
import { createLogger } from "../../../src/runtime/logger.js";
import { createRedis, nodeOptions } from "../../../src/runtime/redis.js";
import { assertUsableRedis, probeRedisWrite } from "../../../src/runtime/redis-checks.js";
import { DELIVERY_QUEUE } from "../../../src/store/delivery-queue.js";
import { sweep } from "../../../workers/sweeper.js";
import {
  createHarness,
  eventually,
  type Harness,
  onboard,
  sendSms,
  silentLogger,
} from "../../support/harness.js";
import { createOwnDatabase } from "../../support/own-database.js";
import {
  RedisClusterUnderTest,
  SentinelGroupUnderTest,
  TlsRedisUnderTest,
} from "../../support/redis-topologies.js";

/**
 * The service on the Redis topologies of decision 0041, in-process (app, relay, BullMQ worker,
 * sweeper, limits) against a real 3-master Redis Cluster and a real Sentinel group.
 */

const OUTCOMES = ["+14155550100", "+15005550501", "+15005550001", "+15005550502", "+14155550101"];

let cluster: RedisClusterUnderTest;
let sentinels: SentinelGroupUnderTest;
// A database of this file's own: the sweeper looks at every unfinished message of its database,
// and the test files running alongside would add theirs to what it re-queues.
let own: Awaited<ReturnType<typeof createOwnDatabase>>;

beforeAll(async () => {
  [cluster, sentinels, own] = await Promise.all([
    RedisClusterUnderTest.start(),
    SentinelGroupUnderTest.start(),
    createOwnDatabase("topologies"),
  ]);
}, 90_000);

afterAll(async () => {
  await Promise.all([cluster?.close(), sentinels?.close()]);
  await own?.drop();
});

/** A harness on this file's own database. */
function harness(env: Record<string, string>): Harness {
  return createHarness({ DATABASE_URL: own.url, ...env });
}

/** Final events per message of an organization: every accepted message must have exactly one. */
async function finalEventCounts(h: Harness, organizationId: string): Promise<Map<string, number>> {
  const rows = await h.sql<{ message_id: string; finals: number }[]>`
    select message_id, count(*) filter (where type in ('success', 'failed', 'rejected'))::int as finals
    from message_events where organization_id = ${organizationId} group by message_id`;
  return new Map(rows.map((row) => [row.message_id, row.finals]));
}

async function sendAll(h: Harness, apiKey: string, count: number): Promise<string[]> {
  const ids: string[] = [];
  for (let i = 0; i < count; i++) {
    const response = await sendSms(h, apiKey, {
      payload: { to: OUTCOMES[i % OUTCOMES.length], body: `topology ${i}` },
      notification_type: i % 3 === 0 ? "OTP" : undefined,
    });
    expect(response.status).toBe(202);
    ids.push(((await response.json()) as { request_id: string }).request_id);
  }
  return ids;
}

async function allFinalOnce(h: Harness, organizationId: string, ids: string[], timeoutMs: number) {
  const counts = await eventually(
    async () => {
      const counts = await finalEventCounts(h, organizationId);
      return ids.every((id) => (counts.get(id) ?? 0) >= 1) ? counts : undefined;
    },
    timeoutMs,
    "every message final",
  );
  expect(ids.filter((id) => counts.get(id) !== 1)).toEqual([]);
}

describe("given a Redis Cluster of 3 masters (REDIS_CLUSTER_NODES)", () => {
  let h: Harness;
  beforeAll(() => {
    h = harness({
      REDIS_CLUSTER_NODES: cluster.seeds,
      SEND_RATE_LIMIT: "1000",
      SEND_DAILY_QUOTA: "1000",
    });
  });
  afterAll(async () => {
    await h?.close();
  });

  it("accepts, relays, sweeps and delivers messages, each final once, with no CROSSSLOT anywhere", async () => {
    const org = await onboard(h);
    const ids = await sendAll(h, org.apiKey, 10);
    // The relay moves them into the queue; one job is then lost, and the sweeper adds it again
    // (its existence check is a pipeline over the queue's keys: one slot).
    await eventually(async () => ((await h.relayOutbox()) === 0 ? true : undefined), 10_000, "outbox empty");
    const lost = ids[1] as string;
    expect(await h.queue.remove(lost)).toBe(1);
    expect(
      await sweep({ db: h.db, queue: h.queue, now: () => new Date(Date.now() + 60_000), graceMs: 0 }),
    ).toBe(1);

    h.startWorker();
    await allFinalOnce(h, org.id, ids, 30_000);

    // Every key of the queue sits on one master; the limits counted in the cluster, not in memory.
    const prefix = h.config.QUEUE_PREFIX;
    const owner = await cluster.masterOf(`${prefix}:${DELIVERY_QUEUE}:meta`);
    expect(await cluster.masterOf(`${prefix}:${DELIVERY_QUEUE}:wait`)).toBe(owner);
    const day = new Date().toISOString().slice(0, 10);
    const limitKeys = (organizationId: string) => [
      `${prefix}:{limits}:rate-limit:send:${organizationId}`,
      `${prefix}:{limits}:quota:send:${organizationId}:${day}`,
    ];
    const [bucket, quota] = limitKeys(org.id) as [string, string];
    expect(await h.redis.exists(bucket)).toBe(1);
    expect(Number(await h.redis.get(quota))).toBe(10);
    // Every organization's limit keys share one slot: a turn's limit commands go to one master.
    const other = await onboard(h);
    await sendAll(h, other.apiKey, 1);
    const keys = [...limitKeys(org.id), ...limitKeys(other.id)];
    expect(await Promise.all(keys.map((key) => h.redis.exists(key)))).toEqual([1, 1, 1, 1]);
    const slots = await Promise.all(keys.map((key) => h.redis.cluster("KEYSLOT", key)));
    expect(new Set(slots).size).toBe(1);
    // The worker's health probe writes to the queue's master.
    await probeRedisWrite(h.redis, h.config.REDIS, [h.queue.toKey("health-probe")]);
    expect(await h.queue.getJobCounts("wait", "active", "delayed")).toEqual({
      wait: 0,
      active: 0,
      delayed: 0,
    });
  }, 60_000);

  it("passes the start-up check, and names the setting when a cluster node is given as a single Redis", async () => {
    await expect(assertUsableRedis(h.config.REDIS, silentLogger)).resolves.toBeUndefined();
    const asUrl = loadConfig({ NODE_ENV: "test", REDIS_URL: `redis://${cluster.nodes[0]?.address}` });
    await expect(assertUsableRedis(asUrl.REDIS, silentLogger)).rejects.toThrow(
      /REDIS_URL: Redis at 127\.0\.0\.1:\d+ is a Redis Cluster node \(cluster_enabled:1\): give the cluster's nodes as REDIS_CLUSTER_NODES/,
    );
    const standalone = sentinels.data[0]?.address as string;
    const notACluster = loadConfig({ NODE_ENV: "test", REDIS_CLUSTER_NODES: standalone });
    await expect(assertUsableRedis(notACluster.REDIS, silentLogger)).rejects.toThrow(
      /REDIS_CLUSTER_NODES: Redis at 127\.0\.0\.1:\d+ is not a Redis Cluster node/,
    );
  });
});

describe("given a password-protected Redis Cluster and a process with the wrong password", () => {
  let guarded: RedisClusterUnderTest;
  beforeAll(async () => {
    guarded = await RedisClusterUnderTest.start({ password: "right-s3cret" });
  }, 60_000);
  afterAll(async () => {
    await guarded?.close();
  });

  it("logs the refused login without the password, in no nested error either", async () => {
    const lines: string[] = [];
    const logger = createLogger({ level: "info", name: "worker" }, { write: (line) => lines.push(line) });
    const config = loadConfig({
      NODE_ENV: "test",
      REDIS_CLUSTER_NODES: guarded.seeds,
      REDIS_PASSWORD: "wr0ng-s3cret",
    });
    const redis = createRedis(config.REDIS, "patient", logger);
    try {
      await eventually(
        async () => (lines.some((line) => line.includes("redis connection error")) ? true : undefined),
        20_000,
        "the connection error logged",
      );
      // What a caller logs of a command refused meanwhile is cleaned the same way.
      const refused = await Promise.race([
        redis.set("k", "v").then(
          () => undefined,
          (error: unknown) => error,
        ),
        new Promise((resolve) => setTimeout(() => resolve(new Error("still waiting")), 3000)),
      ]);
      logger.error({ err: refused }, "command failed");
    } finally {
      redis.disconnect();
    }
    const log = lines.join("");
    expect(log).toContain("redis connection error");
    expect(log).not.toContain("wr0ng-s3cret");
  }, 40_000);
});

describe("given a Redis Cluster of 3 masters and QUEUE_SHARDS=3", () => {
  let h: Harness;
  beforeAll(() => {
    h = harness({
      REDIS_CLUSTER_NODES: cluster.seeds,
      QUEUE_SHARDS: "3",
      ADMIN_USER: "ops",
      ADMIN_PASSWORD: "board-password",
    });
  });
  afterAll(async () => {
    await h?.close();
  });

  it("puts each shard on a master of its own and delivers every message once", async () => {
    const prefix = h.config.QUEUE_PREFIX;
    const masters = await Promise.all(
      h.queues.all.map((queue) => cluster.masterOf(`${prefix}:${queue.name}:meta`)),
    );
    expect(new Set(masters.map((node) => node.port)).size).toBe(3);
    const org = await onboard(h);
    h.startWorker();
    const ids = await sendAll(h, org.apiKey, 30);
    await allFinalOnce(h, org.id, ids, 30_000);

    // The dashboard and the metrics see every shard, read from the cluster.
    const board = await h.app.request("/admin/queues/api/queues", {
      headers: { authorization: `Basic ${Buffer.from("ops:board-password").toString("base64")}` },
    });
    expect(board.status).toBe(200);
    const { queues } = (await board.json()) as { queues: Array<{ name: string }> };
    expect(queues.map((q) => q.name).sort()).toEqual(h.queues.all.map((q) => q.name).sort());
    const metrics = await (await h.app.request("/metrics")).text();
    for (const queue of h.queues.all) {
      expect(metrics).toContain(`notification_queue_jobs{queue="${queue.name}",state="wait"`);
    }
  }, 60_000);
});

describe("given a primary managed by Sentinels (REDIS_SENTINELS, REDIS_SENTINEL_NAME)", () => {
  let h: Harness;
  beforeAll(() => {
    h = harness({ REDIS_SENTINELS: sentinels.addresses, REDIS_SENTINEL_NAME: sentinels.name });
  });
  afterAll(async () => {
    await h?.close();
  });

  it("delivers every message once through a failover in the middle of the flow", async () => {
    const org = await onboard(h);
    h.startWorker();
    const before = await sendAll(h, org.apiKey, 20);
    // The old primary becomes a replica (READONLY) and the Sentinels name the other one.
    const failover = sentinels.failover("command");
    const during = await sendAll(h, org.apiKey, 20);
    await failover;
    const after = await sendAll(h, org.apiKey, 20);
    await allFinalOnce(h, org.id, [...before, ...during, ...after], 45_000);
  }, 60_000);

  it("passes the start-up check, and names the setting for a wrong name or a data node as a Sentinel", async () => {
    await expect(assertUsableRedis(h.config.REDIS, silentLogger)).resolves.toBeUndefined();
    const wrongName = loadConfig({
      NODE_ENV: "test",
      REDIS_SENTINELS: sentinels.addresses,
      REDIS_SENTINEL_NAME: "nope",
    });
    await expect(assertUsableRedis(wrongName.REDIS, silentLogger)).rejects.toThrow(
      /REDIS_SENTINEL_NAME: the Sentinel at 127\.0\.0\.1:\d+ monitors no primary named "nope"/,
    );
    const dataNode = loadConfig({
      NODE_ENV: "test",
      REDIS_SENTINELS: sentinels.data[0]?.address as string,
      REDIS_SENTINEL_NAME: sentinels.name,
    });
    await expect(assertUsableRedis(dataNode.REDIS, silentLogger)).rejects.toThrow(ConfigError);
    await expect(assertUsableRedis(dataNode.REDIS, silentLogger)).rejects.toThrow(
      /REDIS_SENTINELS: Redis at 127\.0\.0\.1:\d+ is not a Sentinel \(redis_mode:standalone\)/,
    );
    const sentinelAsUrl = loadConfig({
      NODE_ENV: "test",
      REDIS_URL: `redis://${sentinels.sentinels[0]?.address}`,
    });
    await expect(assertUsableRedis(sentinelAsUrl.REDIS, silentLogger)).rejects.toThrow(
      /REDIS_URL: Redis at 127\.0\.0\.1:\d+ is a Sentinel, not a data node: give the Sentinels as REDIS_SENTINELS/,
    );
  });
});

describe("given Sentinels that still name a primary that was just made a replica (a failover under way)", () => {
  let group: SentinelGroupUnderTest;
  beforeAll(async () => {
    group = await SentinelGroupUnderTest.start();
  }, 60_000);
  afterAll(async () => {
    await group?.close();
  });

  it("warns and goes on at start-up, and the health probe makes the client ask the Sentinels again", async () => {
    const config = loadConfig({
      NODE_ENV: "test",
      REDIS_SENTINELS: group.addresses,
      REDIS_SENTINEL_NAME: group.name,
    });
    const lines: string[] = [];
    const logger = createLogger({ level: "info", name: "worker" }, { write: (line) => lines.push(line) });
    const redis = createRedis(config.REDIS, "fail-fast", logger);
    try {
      await eventually(async () => (redis.status === "ready" ? true : undefined), 10_000, "client ready");
      const primaryPort = await group.primaryPort();
      const primary = group.data.find((node) => node.port === primaryPort);
      const replica = group.data.find((node) => node.port !== primaryPort);
      const admin = primary?.client();
      await admin?.call("REPLICAOF", "127.0.0.1", String(replica?.port));
      admin?.disconnect();

      await expect(assertUsableRedis(config.REDIS, logger)).resolves.toBeUndefined();
      expect(lines.join("")).toMatch(/could not check Redis at start-up; going on/);
      let closed = 0;
      redis.on("close", () => closed++);
      await expect(probeRedisWrite(redis, config.REDIS, ["health-probe"])).rejects.toThrow(/role:slave/);
      await eventually(async () => (closed > 0 ? true : undefined), 5_000, "the client to reconnect");
    } finally {
      redis.disconnect();
    }
  }, 40_000);
});

describe("given a Redis that speaks TLS only (rediss://, REDIS_TLS_CA_FILE)", () => {
  let tls: TlsRedisUnderTest;
  let h: Harness;
  beforeAll(async () => {
    tls = await TlsRedisUnderTest.start();
    h = harness({ REDIS_URL: tls.url, REDIS_TLS_CA_FILE: tls.caFile });
  }, 30_000);
  afterAll(async () => {
    await h?.close();
    await tls?.close();
  });

  it("checks it, and delivers through it with the certificate verified against the CA file", async () => {
    await expect(assertUsableRedis(h.config.REDIS, silentLogger)).resolves.toBeUndefined();
    const org = await onboard(h);
    h.startWorker();
    const ids = await sendAll(h, org.apiKey, 5);
    await allFinalOnce(h, org.id, ids, 20_000);
  });

  it("refuses the certificate without the CA file (never unverified)", async () => {
    const untrusted = loadConfig({ NODE_ENV: "test", REDIS_URL: tls.url }).REDIS;
    const redis = new Redis(
      untrusted.kind === "single" ? untrusted.url : "",
      nodeOptions(untrusted, "check"),
    );
    const errors: Error[] = [];
    redis.on("error", (error: Error) => errors.push(error));
    await expect(redis.connect()).rejects.toThrow();
    redis.disconnect();
    expect(errors.map((e) => e.message).join("\n")).toMatch(/self[- ]signed|unable to verify|certificate/i);
  });
});
