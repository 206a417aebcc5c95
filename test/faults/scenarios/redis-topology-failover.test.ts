import { afterEach, describe, expect, it, onTestFailed } from "vitest";
import { DELIVERY_QUEUE } from "../../../src/store/delivery-queue.js";
import { RedisClusterUnderTest, SentinelGroupUnderTest } from "../../support/redis-topologies.js";
import { expectSoundOutcome } from "../support/assertions.js";
import { FaultScenario } from "../support/scenario.js";

/**
 * Issue 18 (decision 0041): the Procfile's web and two workers on a Redis Cluster (3 masters, 3
 * replicas, QUEUE_SHARDS=3) and on a Sentinel-managed primary; mid-flow the Redis master that holds the delivery
 * queue is killed (SIGKILL) and its replica takes over, then a worker is SIGKILLed. Every message
 * accepted reaches one final state, none is lost, none has two.
 */
const cleanups: Array<() => Promise<unknown>> = [];
/** Each test's servers and processes go before the next test starts (a 2-core machine). */
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup().catch(() => {});
});

const OUTCOMES = ["+14155550100", "+15005550501", "+15005550001", "+14155550101"];

/** Sends from `senders` loops until `stop()`; returns once they all ended. */
function keepSending(s: FaultScenario, senders: number) {
  let stopped = false;
  let sent = 0;
  const loops = Array.from({ length: senders }, async () => {
    while (!stopped) {
      const result = await s.send(OUTCOMES[sent++ % OUTCOMES.length]);
      expect(result.status, JSON.stringify(result.body)).toBe(202);
    }
  });
  return {
    sent: () => sent,
    async stop() {
      stopped = true;
      await Promise.all(loops);
    },
  };
}

async function untilSent(flow: { sent: () => number }, count: number): Promise<void> {
  while (flow.sent() < count) await new Promise((resolve) => setTimeout(resolve, 50));
}

async function runFlow(s: FaultScenario, what: string, failover: () => Promise<void>): Promise<void> {
  onTestFailed(() => console.error(s.logs()));
  await s.startWeb();
  await s.onboard();
  const [, doomed] = [await s.superviseWorker(), await s.startWorker()];
  const flow = keepSending(s, 4);
  await untilSent(flow, 60);
  const killedAt = flow.sent();
  const started = Date.now();
  await failover();
  const failoverMs = Date.now() - started;
  await untilSent(flow, flow.sent() + 60);
  await doomed.stop("SIGKILL");
  await untilSent(flow, flow.sent() + 40);
  await flow.stop();
  expect(await s.waitForFinal(s.accepted, 60_000)).toEqual([]);
  const audit = await s.audit();
  s.record(
    audit,
    `${what} killed after ${killedAt} sends, new primary in ${(failoverMs / 1000).toFixed(1)} s; then a worker SIGKILLed`,
  );
  await expectSoundOutcome(s, audit);
}

const fastWorkers = {
  // A killed worker's jobs come back within seconds, not 30 s.
  WORKER_LOCK_DURATION_MS: "2000",
  WORKER_STALLED_INTERVAL_MS: "1000",
};

describe("given a Redis Cluster whose queue master dies mid-flow, and then a worker", () => {
  it("delivers every accepted message once", async () => {
    const cluster = await RedisClusterUnderTest.start({ masters: 3, replicasPerMaster: 1 });
    cleanups.push(() => cluster.close());
    const s = await FaultScenario.start("redis-cluster-failover", {
      providerLatencyMs: 30,
      // Three shards: one per master; the one killed holds shard 0.
      env: { ...fastWorkers, REDIS_URL: "", REDIS_CLUSTER_NODES: cluster.seeds, QUEUE_SHARDS: "3" },
    });
    cleanups.push(() => s.close());
    await runFlow(s, "the master of shard 0", async () => {
      const master = await cluster.masterOf(`${s.env.QUEUE_PREFIX}:${DELIVERY_QUEUE}:meta`);
      await cluster.killMaster(master);
    });
  }, 120_000);
});

describe("given a Sentinel-managed primary killed mid-flow, and then a worker", () => {
  it("delivers every accepted message once", async () => {
    const group = await SentinelGroupUnderTest.start();
    cleanups.push(() => group.close());
    const s = await FaultScenario.start("redis-sentinel-failover", {
      providerLatencyMs: 30,
      env: {
        ...fastWorkers,
        REDIS_URL: "",
        REDIS_SENTINELS: group.addresses,
        REDIS_SENTINEL_NAME: group.name,
      },
    });
    cleanups.push(() => s.close());
    await runFlow(s, "the primary", () => group.failover("kill"));
  }, 120_000);
});
