import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it, onTestFailed } from "vitest";
import { expectSoundOutcome } from "../support/assertions.js";
import { FaultScenario, waitFor } from "../support/scenario.js";

/**
 * Issue 4.2: Redis restarts empty, every job gone, while messages wait in the queue and others
 * wait for a scheduled retry (delayed jobs). The sweeper finds each unfinished message without a
 * job and enqueues it again, keeping a scheduled retry's time; every message reaches its final
 * state with the retry count the simulator dictates.
 */
let s: FaultScenario;

beforeAll(async () => {
  // A slow provider and few delivery slots, so jobs really wait in Redis.
  s = await FaultScenario.start("redis-restarted-empty", {
    providerLatencyMs: 200,
    env: { WORKER_CONCURRENCY: "4", RETRY_BASE_DELAY_MS: "1500", MAX_DELIVERY_ATTEMPTS: "3" },
  });
  await s.startWeb();
  await s.onboard();
}, 60_000);

afterAll(async () => {
  await s?.close();
});

/** How many of these messages have their delivery job in Redis. */
async function jobsInRedis(ids: readonly string[]): Promise<number> {
  const redis = new Redis(s.redis.url, { maxRetriesPerRequest: 1, lazyConnect: true });
  redis.on("error", () => {});
  try {
    await redis.connect();
    const pipeline = redis.pipeline();
    for (const id of ids) pipeline.exists(`${s.env.QUEUE_PREFIX}:{deliveries}:${id}`);
    const results = (await pipeline.exec()) ?? [];
    return results.filter(([, exists]) => exists === 1).length;
  } finally {
    redis.disconnect();
  }
}

describe("given Redis restarts empty while messages are queued or waiting for a retry", () => {
  it("re-enqueues every unfinished message and each reaches its final state", async () => {
    onTestFailed(() => console.error(s.logs()));
    await s.startWorker();

    // Mid-retry: transient failures, with retries a second or more away.
    const retrying = await Promise.all(
      Array.from({ length: 12 }, (_, i) => s.send(i % 2 === 0 ? "+15005550500" : "+15005550502")),
    );
    const retryIds = retrying.map((r) => r.id ?? "");
    expect(retrying.every((r) => r.status === 202)).toBe(true);
    await waitFor(
      async () => {
        const rows = await s.sql<{ n: number }[]>`
          select count(distinct message_id)::int as n from message_events
          where message_id in ${s.sql(retryIds)} and data->>'kind' = 'retry_scheduled'`;
        return rows[0]?.n === retryIds.length ? true : undefined;
      },
      15_000,
      "every transient message to have a retry scheduled",
    );

    // Queued: a backlog larger than the worker's slots.
    const queued = await Promise.all(Array.from({ length: 60 }, () => s.send()));
    const queuedIds = queued.map((r) => r.id ?? "");
    expect(queued.every((r) => r.status === 202)).toBe(true);
    const waiting = await waitFor(
      async () => {
        const statuses = await s.statuses(queuedIds);
        const notStarted = queuedIds.filter((id) => statuses.get(id) === "accepted");
        const inRedis = await jobsInRedis(notStarted);
        return inRedis >= 20 ? inRedis : undefined;
      },
      15_000,
      "a backlog of jobs waiting in Redis",
      10,
    );
    const retryStatuses = [...(await s.statuses(retryIds)).values()];
    const stillRetrying = retryStatuses.filter((status) => status === "pending").length;
    expect(stillRetrying).toBeGreaterThan(0);

    await s.redis.kill();
    await s.redis.restart();
    expect(await jobsInRedis([...retryIds, ...queuedIds])).toBe(0);

    // The worker reconnects by itself; its sweeper re-enqueues what Redis lost.
    expect(await s.waitForFinal(s.accepted, 60_000)).toEqual([]);

    const audit = await s.audit();
    s.record(audit, `${stillRetrying} mid-retry + ~${waiting} queued jobs lost with Redis`);
    await expectSoundOutcome(s, audit);
    for (const [index, id] of retryIds.entries()) {
      const message = audit.messages.get(id);
      expect(message?.status).toBe(index % 2 === 0 ? "failed" : "success");
      expect(message?.retryCount).toBe(2 + (message?.interrupted ?? 0));
    }
    for (const id of queuedIds) expect(audit.messages.get(id)?.status).toBe("success");
  }, 120_000);
});
