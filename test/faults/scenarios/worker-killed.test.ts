import { afterAll, beforeAll, describe, expect, it, onTestFailed } from "vitest";
import { expectSoundOutcome } from "../support/assertions.js";
import { FaultScenario, waitFor } from "../support/scenario.js";

/**
 * Issue 4.3: a worker is killed (SIGKILL) with many deliveries in flight at the provider; a
 * second worker starts after. BullMQ hands the dead worker's jobs on once their locks expire
 * (short locks here: WORKER_LOCK_DURATION_MS / WORKER_STALLED_INTERVAL_MS). Every message still
 * ends in exactly one final state with seq 1..n, and a message sent twice shows it: an
 * `attempt_interrupted` retry in its events (DESIGN.md §3, at-least-once delivery).
 */
const MESSAGES = 200;
let s: FaultScenario;

beforeAll(async () => {
  s = await FaultScenario.start("worker-killed", {
    providerLatencyMs: 150,
    env: {
      WORKER_CONCURRENCY: "20",
      WORKER_LOCK_DURATION_MS: "2000",
      WORKER_STALLED_INTERVAL_MS: "1000",
    },
  });
  await s.startWeb();
  await s.onboard();
}, 60_000);

afterAll(async () => {
  await s?.close();
});

describe("given a worker killed with SIGKILL in the middle of deliveries", () => {
  it("every message still reaches exactly one final state, duplicates visible in the events", async () => {
    onTestFailed(() => console.error(s.logs()));
    const provider = s.provider;
    if (!provider) throw new Error("this scenario needs the fake provider");
    const doomed = await s.startWorker();

    for (let sent = 0; sent < MESSAGES; sent += 20) {
      const batch = await Promise.all(Array.from({ length: 20 }, () => s.send()));
      expect(batch.every((r) => r.status === 202)).toBe(true);
    }
    // Kill it while deliveries are at the provider and some messages are done already.
    await waitFor(
      async () => {
        const statuses = await s.statuses(s.accepted);
        const done = [...statuses.values()].filter((status) => status === "success").length;
        return provider.inFlight >= 10 && done >= 20 ? true : undefined;
      },
      20_000,
      "deliveries in flight",
      5,
    );
    const inFlightAtKill = provider.inFlight;
    await doomed.stop("SIGKILL");

    await s.startWorker();
    expect(await s.waitForFinal(s.accepted, 45_000)).toEqual([]);

    const audit = await s.audit();
    s.record(audit, `${inFlightAtKill} deliveries at the provider when killed`);
    await expectSoundOutcome(s, audit);
    for (const id of s.accepted) expect(audit.messages.get(id)?.status).toBe("success");
    // The attempts the dead worker started are visible as interrupted (each possibly a duplicate).
    expect(audit.interrupted).toBeGreaterThan(0);
    expect(provider.totalSends).toBeLessThanOrEqual(MESSAGES + audit.interrupted);
  }, 120_000);
});
