import { createHash, randomUUID } from "node:crypto";
import { connect } from "node:net";
import { afterAll, beforeAll, describe, expect, it, onTestFailed } from "vitest";
import { expectSoundOutcome } from "../support/assertions.js";
import { FaultScenario, type SendResult, waitFor } from "../support/scenario.js";

/**
 * Issue 4.6: SIGTERM to the worker and to web while work is in flight. The worker lets its
 * in-flight deliveries finish (or hands them back) and exits 0; web answers every request it had
 * received, then exits 0; both well within 25 s. Nothing is lost or interrupted.
 */
const EXIT_WITHIN_MS = 25_000;
let s: FaultScenario;

beforeAll(async () => {
  s = await FaultScenario.start("graceful-shutdown", {
    providerLatencyMs: 1000,
    env: { WORKER_CONCURRENCY: "10", DATABASE_POOL_SIZE: "40" },
  });
  await s.startWeb();
  await s.onboard();
}, 60_000);

afterAll(async () => {
  await s?.close();
});

/** Messages whose last event is an attempt that started: a delivery abandoned mid-flight. */
async function abandonedAttempts(): Promise<string[]> {
  const rows = await s.sql<{ message_id: string }[]>`
    select e.message_id from message_events e
    join messages m on m.message_id = e.message_id and m.version = e.seq
    where m.organization_id = ${s.organizationId} and e.data->>'kind' = 'attempt_started'`;
  return rows.map((row) => row.message_id);
}

async function stopTimed(process: { stop: (signal: NodeJS.Signals) => Promise<number | null> }) {
  const started = Date.now();
  const code = await process.stop("SIGTERM");
  return { code, ms: Date.now() - started };
}

describe("given SIGTERM while work is in flight", () => {
  it("the worker finishes its in-flight deliveries and exits 0", async () => {
    onTestFailed(() => console.error(s.logs()));
    const provider = s.provider;
    if (!provider) throw new Error("this scenario needs the fake provider");
    const worker = await s.startWorker();
    const sent = await Promise.all(Array.from({ length: 30 }, () => s.send()));
    expect(sent.every((r) => r.status === 202)).toBe(true);
    await waitFor(() => (provider.inFlight >= 5 ? true : undefined), 10_000, "deliveries in flight", 5);

    const inFlight = provider.inFlight;
    const exit = await stopTimed(worker);
    expect(exit.code, worker.output()).toBe(0);
    expect(exit.ms).toBeLessThan(EXIT_WITHIN_MS);
    expect(provider.inFlight).toBe(0);
    expect(await abandonedAttempts()).toEqual([]);

    // The rest waits in Redis for the next worker, and nothing is delivered twice.
    const next = await s.startWorker();
    expect(await s.waitForFinal(s.accepted, 30_000)).toEqual([]);
    const audit = await s.audit();
    await expectSoundOutcome(s, audit);
    expect(audit.interrupted).toBe(0);
    expect(provider.totalSends).toBe(s.accepted.length);
    const last = await stopTimed(next);
    expect(last.code, next.output()).toBe(0);
    s.record(audit, `worker: ${inFlight} in flight, exit 0 in ${exit.ms} ms`);
  }, 120_000);

  it("web answers every request it had received, then exits 0", async () => {
    onTestFailed(() => console.error(s.logs()));
    const web = s.processes.find((p) => p.name.startsWith("web"))?.process;
    if (!web) throw new Error("no web process");
    const count = 20;
    // One organization (one key) per request: a key's lookup shows its request is in its handler.
    const onboarded = await fetch(
      `${s.base}/api/v1/onboarding/organizations/shutdown-${randomUUID().slice(0, 8)}`,
      {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({
          organizations: Array.from({ length: count }, (_, i) => ({ name: `Org ${i}` })),
        }),
      },
    );
    const { organizations } = (await onboarded.json()) as { organizations: Array<{ apiKey: string }> };
    const keys = organizations.map((organization) => organization.apiKey);
    const reachedDatabase = s.proxy.watch(keys.map((key) => createHash("sha256").update(key).digest("hex")));
    // Accepts wait for this lock: the requests stay in flight until it goes.
    const release = await holdLock("messages");
    const acceptedBefore = s.accepted.length;
    const requests: Array<Promise<SendResult | Error>> = keys.map((key) =>
      s
        .send("+14155550100", `shutdown ${randomUUID()}`, key)
        .catch((error: unknown) => (error instanceof Error ? error : new Error(String(error)))),
    );
    await waitFor(
      () => (reachedDatabase.size === count ? true : undefined),
      15_000,
      "every request in flight",
    );

    const exit = stopTimed(web);
    // The listener closes at once; the requests it had are still being answered.
    await waitFor(() => refusesConnections(s.base), 10_000, "web to stop accepting connections");
    release();
    const responses = await Promise.all(requests);
    const { code, ms } = await exit;
    expect(responses.map((r) => (r instanceof Error ? r.message : r.status))).toEqual(Array(count).fill(202));
    expect(code, web.output()).toBe(0);
    expect(ms).toBeLessThan(EXIT_WITHIN_MS);
    const ids = s.accepted.slice(acceptedBefore);
    expect((await s.statuses(ids)).size).toBe(count);
    // And they are delivered like any other.
    const worker = await s.startWorker();
    expect(await s.waitForFinal(s.accepted, 30_000)).toEqual([]);
    const audit = await s.audit();
    await expectSoundOutcome(s, audit);
    expect((await worker.stop("SIGTERM")) ?? -1).toBe(0);
    s.record(audit, `web: ${count} requests in flight, exit 0 in ${ms} ms`);
  }, 60_000);
});

/** True once nothing listens on the web's port any more (a fresh TCP connection is refused). */
function refusesConnections(base: string): Promise<true | undefined> {
  const { hostname, port } = new URL(base);
  return new Promise((resolve) => {
    const socket = connect(Number(port), hostname);
    socket.once("connect", () => {
      socket.destroy();
      resolve(undefined);
    });
    socket.once("error", () => resolve(true));
  });
}

/** Holds `lock table <table> in share mode` in a transaction of its own until released. */
async function holdLock(table: string): Promise<() => void> {
  let release = () => {};
  const held = new Promise<void>((resolve) => {
    release = resolve;
  });
  await new Promise<void>((resolve, reject) => {
    s.sql
      .begin(async (tx) => {
        await tx.unsafe(`lock table ${table} in share mode`);
        resolve();
        await held;
      })
      .catch(reject);
  });
  return release;
}
