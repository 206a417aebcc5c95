import pino from "pino";
import { describe, expect, it } from "vitest";
import { DatabaseGate } from "../../../workers/database-gate.js";

/** The worker's view of Postgres reachability (workers/database-gate.ts), on its own. */
const logger = pino({ level: "silent" });
const refused = Object.assign(new Error("connect ECONNREFUSED 127.0.0.1:5432"), { code: "ECONNREFUSED" });

function gate(probe: () => Promise<unknown>) {
  const events: string[] = [];
  const instance = new DatabaseGate({
    probe,
    probeIntervalMs: 10,
    logger,
    onUnavailable: () => events.push("paused"),
    onAvailable: () => events.push("resumed"),
  });
  return { instance, events };
}

describe("the database gate", () => {
  it("ignores errors that do not mean the database is unreachable", () => {
    const { instance, events } = gate(async () => {});
    expect(instance.reportFailure(new Error("duplicate key"))).toBe(false);
    expect(instance.reportFailure(Object.assign(new Error("unique"), { code: "23505" }))).toBe(false);
    expect(instance.available).toBe(true);
    expect(events).toEqual([]);
  });

  it("closes once on an outage, probes, and opens again when the probe answers", async () => {
    let answers = false;
    let probes = 0;
    const { instance, events } = gate(async () => {
      probes++;
      if (!answers) throw refused;
    });
    expect(instance.reportFailure(refused)).toBe(true);
    expect(instance.reportFailure(refused)).toBe(true);
    expect(instance.available).toBe(false);
    expect(events).toEqual(["paused"]);

    const waiting = instance.waitUntilAvailable(5000);
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(probes).toBeGreaterThan(1);
    answers = true;
    expect(await waiting).toBe(true);
    expect(instance.available).toBe(true);
    expect(events).toEqual(["paused", "resumed"]);
    instance.close();
  });

  it("lets a waiter go at its deadline, or when closed for shutdown", async () => {
    const { instance } = gate(async () => {
      throw refused;
    });
    instance.reportFailure(refused);
    expect(await instance.waitUntilAvailable(30)).toBe(false);
    const waiting = instance.waitUntilAvailable(60_000);
    instance.close();
    expect(await waiting).toBe(false);
    expect(await instance.waitUntilAvailable(60_000)).toBe(false);
  });

  it("once closed for shutdown, never lets a waiter retry, even though it last saw the database answering", async () => {
    const { instance } = gate(async () => {});
    instance.close();
    // An outage met after the close does not flip the gate (no probing any more)...
    expect(instance.reportFailure(refused)).toBe(true);
    // ...so a holder asking whether to try its write again must hear "no", not "available".
    expect(await instance.waitUntilAvailable(60_000)).toBe(false);
  });
});
