import { afterAll, beforeAll, describe, expect, it, onTestFailed } from "vitest";
import { expectSoundOutcome } from "../support/assertions.js";
import { FaultScenario, type SendResult, waitFor } from "../support/scenario.js";

/**
 * Issue 4.5: Postgres becomes unreachable (the proxy in front of it is cut), first as a network
 * partition (connections hang: blackhole), then as a database that refuses connections. The API
 * answers 503 `{ error }` with Retry-After instead of hanging; the worker pauses instead of
 * burning delivery attempts, holding outcomes the provider already gave; when Postgres is back
 * everything resumes on its own and every accepted message reaches a final state, none failed.
 */
/** The web process's connect_timeout is 1.5 s (src/api/api-process.ts): the issue asks for a 503 within 2 s. */
const PARTITION_503_WITHIN_MS = 2_000;
const REFUSED_503_WITHIN_MS = 1_000;
let s: FaultScenario;

beforeAll(async () => {
  s = await FaultScenario.start("postgres-unavailable", {
    providerLatencyMs: 300,
    env: {
      WORKER_CONCURRENCY: "10",
      RETRY_BASE_DELAY_MS: "200",
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

function expect503(response: { status: number; body: unknown; headers: Headers }, what: string) {
  expect(response.status, `${what}: ${JSON.stringify(response.body)}`).toBe(503);
  expect(Object.keys(response.body as object), what).toEqual(["error"]);
  expect(typeof (response.body as { error: unknown }).error, what).toBe("string");
  expect(Number(response.headers.get("retry-after")), `${what}: Retry-After`).toBeGreaterThan(0);
}

describe("given Postgres becomes unreachable", () => {
  it("answers 503 at once, pauses the worker, and resumes by itself when Postgres is back", async () => {
    onTestFailed(() => console.error(s.logs()));
    const provider = s.provider;
    if (!provider) throw new Error("this scenario needs the fake provider");
    // Restarted if it crashes, as a platform would: postgres.js 3.4.9 can crash a process whose
    // connection dies inside a transaction (see postgres-reset-mid-transaction.test.ts).
    const worker = await s.superviseWorker();

    const before: SendResult[] = [];
    for (let i = 0; i < 30; i++) before.push(await s.send(i % 3 === 0 ? "+15005550502" : "+14155550100"));
    expect(before.every((r) => r.status === 202)).toBe(true);
    await waitFor(() => (provider.inFlight >= 5 ? true : undefined), 10_000, "deliveries in flight", 5);
    expect((await s.get("/readyz")).status, "/readyz before the outage").toBe(200);

    // A partition: open connections die, new ones hang until the client's own time-out.
    await s.proxy.cut("blackhole");
    const partition = await Promise.all([s.send(), s.get(`/api/v1/messages/${before[0]?.id}`)]);
    expect503(partition[0], "POST during a partition");
    expect503(partition[1], "GET during a partition");
    const partitionMs = Math.max(...partition.map((r) => r.elapsedMs));
    expect(partitionMs).toBeLessThan(PARTITION_503_WITHIN_MS);
    expect((await s.get("/readyz")).status, "/readyz during the outage").toBe(503);

    // Postgres down: connections refused.
    await s.proxy.cut("refuse");
    const refused = await Promise.all([s.send(), s.get(`/api/v1/messages/${before[0]?.id}`)]);
    expect503(refused[0], "POST while refused");
    expect503(refused[1], "GET while refused");
    const refusedMs = Math.max(...refused.map((r) => r.elapsedMs));
    expect(refusedMs).toBeLessThan(REFUSED_503_WITHIN_MS);
    expect((await s.get("/healthz")).status).toBe(200);
    // The worker pauses, and deliveries at the provider when the database went away keep their
    // outcome until it is back; unless the worker crashed first (postgres.js #1208, see above),
    // in which case those attempts come back as interrupted ones, and the checks below allow it.
    const saw = (text: string) => () =>
      worker.output().includes(text) || worker.crashes.length > 0 ? true : undefined;
    await waitFor(saw("pausing the delivery worker"), 15_000, "the worker to pause");
    await waitFor(saw("holding a delivery outcome"), 15_000, "an outcome held for recording");
    const sendsWhilePaused = provider.totalSends;

    await s.proxy.restore();
    const resumed = await waitFor(
      async () => {
        const response = await s.send();
        return response.status === 202 ? response : undefined;
      },
      15_000,
      "the API to accept again",
      100,
    );
    expect(resumed.status).toBe(202);
    if (worker.crashes.length === 0) {
      await waitFor(
        () => (worker.output().includes("resuming the delivery worker") ? true : undefined),
        15_000,
        "the worker to resume",
      );
    }
    for (let i = 0; i < 10; i++) expect((await s.send()).status).toBe(202);

    expect(await s.waitForFinal(s.accepted, 60_000)).toEqual([]);
    const audit = await s.audit();
    s.record(
      audit,
      `503 in ${Math.round(partitionMs)} ms (partition), ${Math.round(refusedMs)} ms (refused); ` +
        `worker crashes: ${worker.crashes.length}`,
    );
    if (worker.crashes.length > 0) console.warn(`worker crashed:\n${worker.crashes.join("\n")}`);
    await expectSoundOutcome(s, audit);
    // Nothing failed because of the outage, and no attempt was burned: the only retries are the
    // simulated failures of +15005550502 and, if any, attempts interrupted mid-commit. A simulated
    // failure can itself be the interrupted attempt (the provider answered, the worker crashed
    // before recording it), so the interruptions add at most their number.
    for (const [index, result] of before.entries()) {
      const message = audit.messages.get(result.id ?? "");
      expect(message?.status, JSON.stringify(message)).toBe("success");
      const simulated = index % 3 === 0 ? 2 : 0;
      expect(message?.retryCount, JSON.stringify(message)).toBeGreaterThanOrEqual(simulated);
      expect(message?.retryCount, JSON.stringify(message)).toBeLessThanOrEqual(
        simulated + (message?.interrupted ?? 0),
      );
    }
    expect(provider.totalSends).toBeGreaterThanOrEqual(sendsWhilePaused);
  }, 150_000);
});
