import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it, onTestFailed } from "vitest";
import { expectSoundOutcome } from "../support/assertions.js";
import { FaultScenario, waitFor } from "../support/scenario.js";

/**
 * Issue 20: scheduled sends wait in Postgres (`scheduled_deliveries`), not as delayed jobs in
 * Redis. Redis is flushed twice: while every scheduled message still waits, and again once the
 * first of them have left for the queue (their jobs lost with it: the sweeper's part). None is
 * lost, none is attempted before its `send_at`, and those the flushes did not touch start within
 * a second of it.
 */
let s: FaultScenario;

beforeAll(async () => {
  s = await FaultScenario.start("redis-flushed-scheduled", {
    env: { SWEEP_INTERVAL_MS: "1000", SWEEP_GRACE_MS: "2000" },
  });
  await s.startWeb();
  await s.onboard();
  await s.startWorker();
}, 60_000);

afterAll(async () => {
  await s?.close();
});

async function flushRedis(): Promise<void> {
  const redis = new Redis(s.redis.url, { maxRetriesPerRequest: 1 });
  try {
    await redis.flushall();
  } finally {
    redis.disconnect();
  }
}

describe("given Redis is flushed while scheduled sends wait", () => {
  it("sends every one, none before its send_at", async () => {
    onTestFailed(() => console.error(s.logs()));
    const start = Date.now();
    // 40 messages due from 3 s to 7 s from now, one every 100 ms.
    const scheduled = await Promise.all(
      Array.from({ length: 40 }, async (_, i) => {
        const sendAt = new Date(start + 3000 + i * 100).toISOString();
        const sent = await s.send(undefined, undefined, undefined, { send_at: sendAt });
        return { id: sent.id ?? "", status: sent.status, sendAt };
      }),
    );
    expect(scheduled.every((m) => m.status === 202)).toBe(true);
    const ids = scheduled.map((m) => m.id);

    // Every one waits in Postgres: nothing in the outbox or Redis to lose yet.
    const waiting = await s.sql<{ n: number }[]>`
      select count(*)::int as n from scheduled_deliveries where message_id in ${s.sql(ids)}`;
    expect(waiting[0]?.n).toBe(ids.length);
    await flushRedis();

    // Again once some have left for the queue (a job flushed with Redis is the sweeper's to add).
    await waitFor(
      async () =>
        [...(await s.statuses(ids)).values()].some((status) => status !== "accepted") ? true : undefined,
      15_000,
      "the first scheduled sends to be attempted",
    );
    await flushRedis();
    const secondFlushAt = Date.now();

    expect(await s.waitForFinal(ids, 60_000)).toEqual([]);
    const starts = await s.sql<{ message_id: string; at: number }[]>`
      select message_id, (extract(epoch from min(occurred_at)) * 1000)::float8 as at from message_events
      where message_id in ${s.sql(ids)} and type = 'pending' group by message_id`;
    const startOf = new Map(starts.map((row) => [row.message_id, row.at]));
    let worstLateness = 0;
    for (const { id, sendAt } of scheduled) {
      const lateness = (startOf.get(id) ?? Number.NaN) - Date.parse(sendAt);
      expect(lateness, `message ${id}'s first attempt before its send_at`).toBeGreaterThanOrEqual(0);
      // Due well after the second flush: neither flush touched it.
      if (Date.parse(sendAt) > secondFlushAt + 1000) {
        expect(lateness, `message ${id}'s first attempt late`).toBeLessThan(1000);
        worstLateness = Math.max(worstLateness, lateness);
      }
    }

    const audit = await s.audit();
    s.record(
      audit,
      `40 scheduled, Redis flushed twice; worst lateness of those untouched ${worstLateness} ms`,
    );
    await expectSoundOutcome(s, audit);
    for (const id of ids) expect(audit.messages.get(id)?.status).toBe("success");
  }, 120_000);
});
