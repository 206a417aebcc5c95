import { afterAll, beforeAll, describe, expect, it, onTestFailed } from "vitest";
import { expectSoundOutcome } from "../support/assertions.js";
import { FaultScenario, waitFor } from "../support/scenario.js";

/**
 * Issue 4.1: Redis goes away while requests arrive. The API still answers 202 (the accepted event
 * is in Postgres); once Redis is back the sweeper enqueues what never reached it, and every
 * message is delivered exactly once.
 */
let s: FaultScenario;
let worker: Awaited<ReturnType<FaultScenario["startWorker"]>>;
const SHUTDOWN_TIMEOUT_MS = 15_000;

beforeAll(async () => {
  s = await FaultScenario.start("redis-unavailable", {
    env: { SWEEP_INTERVAL_MS: "200", SWEEP_GRACE_MS: "500" },
  });
  await s.startWeb();
  worker = await s.startWorker({
    SHUTDOWN_TIMEOUT_MS: String(SHUTDOWN_TIMEOUT_MS),
    // What a delivery under way may take at shutdown with Redis away: a provider call, + 1 s.
    TWILIO_TIMEOUT_MS: "1000",
    SMTP_TIMEOUT_MS: "1000",
    PUSH_TIMEOUT_MS: "1000",
  });
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

  it("and a worker stopped while Redis is down exits 0 well before its deadline: sweeps, relay and jobs do not wait for Redis", async () => {
    onTestFailed(() => console.error(s.logs()));
    // A message between retries (transient failure on every attempt) is work for the sweeper:
    // unfinished, no outbox row, so each sweep asks Redis whether its job is there.
    const retrying = await s.send("+15005550500");
    await waitFor(
      async () =>
        (await s.statuses([retrying.id ?? ""])).get(retrying.id ?? "") === "pending" ? true : undefined,
      10_000,
      "the message between retries",
    );
    await s.redis.kill();
    await waitFor(
      () => /"name":"worker".*"msg":"redis connection error"/.test(worker.output()) || undefined,
      10_000,
      "the worker seeing the outage",
    );
    // Give the sweeper (every 200 ms) time to ask Redis about that message: its pipeline gets
    // errors at once, where a client queueing commands offline would wait for Redis.
    await new Promise((resolve) => setTimeout(resolve, 1000));
    const stoppedAt = Date.now();
    expect(await worker.stop("SIGTERM")).toBe(0);
    expect(Date.now() - stoppedAt).toBeLessThan(SHUTDOWN_TIMEOUT_MS / 3);
    await s.redis.restart();
  }, 60_000);
});
