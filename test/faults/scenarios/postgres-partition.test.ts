import { afterAll, beforeAll, describe, expect, it, onTestFailed } from "vitest";
import { expectSoundOutcome } from "../support/assertions.js";
import { FaultScenario, waitFor } from "../support/scenario.js";

/**
 * A partition that leaves open connections open. When the database host vanishes or the network
 * drops packets, the pool's established connections get neither a close nor a reset: a query
 * sent on one waits for TCP to give up (minutes). The web process bounds every request with
 * REQUEST_TIMEOUT_MS and answers 503 with Retry-After instead of hanging (the 2 s connect_timeout
 * only covers new connections; postgres-unavailable.test.ts covers those). The worker waits the
 * partition out and resumes when it heals.
 */
const REQUEST_TIMEOUT_MS = 1_500;
let s: FaultScenario;

beforeAll(async () => {
  s = await FaultScenario.start("postgres-partition", { providerLatencyMs: 300 });
  await s.startWeb({ REQUEST_TIMEOUT_MS: String(REQUEST_TIMEOUT_MS) });
  await s.onboard();
}, 60_000);

afterAll(async () => {
  await s?.close();
});

describe("given a partition that freezes the connections already open", () => {
  it("a request on a frozen connection gets a 503 with Retry-After instead of hanging", async () => {
    onTestFailed(() => console.error(s.logs()));
    const provider = s.provider;
    if (!provider) throw new Error("this scenario needs the fake provider");
    await s.startWorker();
    const sent = await s.send();
    expect(sent.status).toBe(202);
    for (let i = 0; i < 20; i++) expect((await s.send()).status).toBe(202);
    await waitFor(() => (provider.inFlight >= 3 ? true : undefined), 10_000, "deliveries in flight", 5);
    await s.proxy.cut("freeze");
    const started = Date.now();
    const answer = await fetch(`${s.base}/api/v1/messages/${sent.id}`, {
      headers: { "x-api-key": s.apiKey },
      signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS + 3_000),
    });
    const answeredInMs = Date.now() - started;
    expect(answer.status).toBe(503);
    expect(answer.headers.get("retry-after")).toBe("5");
    expect(await answer.json()).toEqual({ error: "Service temporarily unavailable; retry shortly" });
    expect(answeredInMs).toBeLessThan(REQUEST_TIMEOUT_MS + 1_000);

    // When the partition heals, the held packets go through and the API answers again.
    await s.proxy.restore();
    const after = await s.get(`/api/v1/messages/${sent.id}`);
    expect(after.status).toBe(200);
    // The worker waited it out: everything is delivered, once, nothing failed or interrupted.
    expect(await s.waitForFinal(s.accepted, 30_000)).toEqual([]);
    const audit = await s.audit();
    await expectSoundOutcome(s, audit);
    for (const id of s.accepted) expect(audit.messages.get(id)?.status).toBe("success");
    expect(audit.interrupted).toBe(0);
    s.record(audit, `request on a frozen connection: 503 in ${answeredInMs} ms`);
  }, 60_000);
});
