import { afterAll, beforeAll, describe, expect, it, onTestFailed } from "vitest";
import { freePort } from "../../support/processes.js";
import { expectSoundOutcome } from "../support/assertions.js";
import { FaultScenario } from "../support/scenario.js";

/**
 * Issue 4.4: two worker processes on one queue. BullMQ gives each job to one worker at a time and
 * the event store refuses a second writer (unique (message_id, seq)): no message gets two
 * terminal events, and with both workers healthy no message is even sent twice.
 */
const MESSAGES = 300;
let s: FaultScenario;

beforeAll(async () => {
  s = await FaultScenario.start("two-workers", { providerLatencyMs: 20, env: { WORKER_CONCURRENCY: "10" } });
  await s.startWeb();
  await s.onboard();
}, 60_000);

afterAll(async () => {
  await s?.close();
});

/** Messages a worker finished, from its /metrics; undefined when the worker serves no metrics. */
async function finishedBy(port: number): Promise<number | undefined> {
  try {
    const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
    const lines = text.split("\n").filter((line) => line.startsWith("notification_messages_final_total"));
    if (lines.length === 0) return undefined;
    return lines.reduce((sum, line) => sum + Number(line.split(" ").at(-1)), 0);
  } catch {
    return undefined;
  }
}

describe("given two worker processes on the same queue", () => {
  it("no message gets two terminal events, and none is sent twice", async () => {
    onTestFailed(() => console.error(s.logs()));
    const ports = [await freePort(), await freePort()];
    for (const port of ports) await s.startWorker({ WORKER_METRICS_PORT: String(port) });

    for (let sent = 0; sent < MESSAGES; sent += 25) {
      const batch = await Promise.all(Array.from({ length: 25 }, () => s.send()));
      expect(batch.every((r) => r.status === 202)).toBe(true);
    }
    expect(await s.waitForFinal(s.accepted, 45_000)).toEqual([]);

    const audit = await s.audit();
    s.record(audit, "2 workers, 1 queue");
    await expectSoundOutcome(s, audit);
    expect(audit.interrupted).toBe(0);
    const provider = s.provider;
    for (const [id, message] of audit.messages) {
      expect(message.status, id).toBe("success");
      expect(message.attemptsStarted, id).toBe(1);
    }
    expect(provider?.totalSends).toBe(MESSAGES);

    // Both took a share, when their metrics say so (the /metrics endpoint may be absent).
    const shares = await Promise.all(ports.map(finishedBy));
    if (shares.every((share) => share !== undefined)) {
      expect(
        shares.every((share) => (share ?? 0) > 0),
        `shares ${shares.join(", ")}`,
      ).toBe(true);
    }
  }, 120_000);
});
