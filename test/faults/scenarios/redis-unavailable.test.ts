import { afterAll, beforeAll, describe, expect, it, onTestFailed } from "vitest";
import { expectSoundOutcome } from "../support/assertions.js";
import { FaultScenario } from "../support/scenario.js";

/**
 * Issue 4.1: Redis goes away while requests arrive. The API still answers 202 (the accepted event
 * is in Postgres); once Redis is back the sweeper enqueues what never reached it, and every
 * message is delivered exactly once.
 */
let s: FaultScenario;

beforeAll(async () => {
  s = await FaultScenario.start("redis-unavailable", {
    env: { SWEEP_INTERVAL_MS: "200", SWEEP_GRACE_MS: "500" },
  });
  await s.startWeb();
  await s.startWorker();
  await s.onboard();
}, 60_000);

afterAll(async () => {
  await s?.close();
});

describe("given Redis is unavailable while requests arrive", () => {
  it("answers every request 202 at once, and delivers each exactly once when Redis returns", async () => {
    onTestFailed(() => console.error(s.logs()));
    const before = await s.send();
    expect(before.status).toBe(202);
    expect(await s.waitForFinal(s.accepted, 10_000)).toEqual([]);

    await s.redis.kill();
    const during = [];
    for (let batch = 0; batch < 4; batch++) {
      during.push(...(await Promise.all(Array.from({ length: 10 }, () => s.send()))));
    }
    for (const response of during) {
      expect(response.status, JSON.stringify(response.body)).toBe(202);
      expect(response.elapsedMs).toBeLessThan(2000);
    }
    // Nothing can be delivered meanwhile: no job reached Redis.
    const stuck = await s.statuses(during.map((r) => r.id ?? ""));
    expect([...stuck.values()].every((status) => status === "accepted")).toBe(true);

    await s.redis.restart();
    const after = await Promise.all(Array.from({ length: 5 }, () => s.send()));
    expect(after.map((r) => r.status)).toEqual([202, 202, 202, 202, 202]);

    expect(await s.waitForFinal(s.accepted, 30_000)).toEqual([]);
    const audit = await s.audit();
    s.record(audit, `${during.length} sent while Redis was down`);
    await expectSoundOutcome(s, audit);
    for (const id of s.accepted) {
      const message = audit.messages.get(id);
      expect(message?.status).toBe("success");
      expect(message?.retryCount).toBe(0);
    }
    expect(audit.interrupted).toBe(0);
  }, 90_000);
});
