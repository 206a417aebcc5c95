import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { Webhook as StandardWebhook } from "standardwebhooks";
import { afterAll, beforeAll, describe, expect, it, onTestFailed } from "vitest";
import { expectSoundOutcome } from "../support/assertions.js";
import { FaultScenario, waitFor } from "../support/scenario.js";

/**
 * Status webhooks (docs/decisions/0036): a worker is killed (SIGKILL) with webhook deliveries
 * committed and not yet POSTed, and others in flight at the endpoint; a second worker starts.
 * The deliveries were written in the events' own transactions, and the dead worker's leases run
 * out (WEBHOOK_LEASE_MS, its shortest here), so every event still reaches the endpoint at least
 * once, each verified with the Standard Webhooks library. A second endpoint takes final events
 * only: the dead worker's appends wrote those deliveries leased to it, to send without a claim
 * (decision 0036, "The handoff"); those it had not sent are claimed once their leases run out.
 */
const MESSAGES = 60;
let s: FaultScenario;
let base = "";
/** Every delivery the endpoints received, by path and `webhook-id` (`/all evt_…`). */
const received = new Map<string, number>();
let inFlight = 0;
/** Each endpoint's secret, by path: `/all` takes every event, `/finals` final events only. */
const secrets = new Map<string, string>();
const bodies: Array<{ path: string; id: string; timestamp: string; signature: string; body: string }> = [];

/** An endpoint that answers 200 after 300 ms, so that many attempts are under way at the kill. */
const endpoint: Server = createServer((request, response) => {
  const chunks: Buffer[] = [];
  inFlight++;
  request.on("data", (chunk: Buffer) => chunks.push(chunk));
  request.on("end", () => {
    setTimeout(() => {
      inFlight--;
      const id = String(request.headers["webhook-id"]);
      const path = request.url ?? "";
      received.set(`${path} ${id}`, (received.get(`${path} ${id}`) ?? 0) + 1);
      bodies.push({
        path,
        id,
        timestamp: String(request.headers["webhook-timestamp"]),
        signature: String(request.headers["webhook-signature"]),
        body: Buffer.concat(chunks).toString(),
      });
      response.writeHead(200).end();
    }, 300);
  });
});

beforeAll(async () => {
  await new Promise<void>((resolve) => endpoint.listen(0, "127.0.0.1", resolve));
  base = `http://127.0.0.1:${(endpoint.address() as AddressInfo).port}`;
  s = await FaultScenario.start("webhook-worker-killed", {
    env: {
      WEBHOOK_ALLOWED_NETWORKS: "127.0.0.1/32",
      WEBHOOK_ALLOWED_HOSTS: "127.0.0.1",
      WEBHOOK_LEASE_MS: "11000",
      WEBHOOK_ENDPOINT_CONCURRENCY: "8",
    },
  });
  await s.startWeb();
  await s.onboard();
  for (const [path, events] of [
    ["/all", undefined],
    ["/finals", ["message.succeeded", "message.failed", "message.rejected"]],
  ] as const) {
    const created = await fetch(`${s.base}/api/v1/webhooks/endpoints`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-api-key": s.apiKey },
      body: JSON.stringify({ url: `${base}${path}`, events }),
    });
    expect(created.status).toBe(201);
    secrets.set(path, ((await created.json()) as { secret: string }).secret);
  }
}, 60_000);

afterAll(async () => {
  await s?.close();
  endpoint.closeAllConnections();
  await new Promise<void>((resolve) => endpoint.close(() => resolve()));
});

describe("given a worker killed with webhook deliveries committed and in flight", () => {
  it("every event still reaches the endpoint at least once, signed", async () => {
    onTestFailed(() => console.error(s.logs()));
    const doomed = await s.startWorker();
    for (let sent = 0; sent < MESSAGES; sent += 20) {
      const batch = await Promise.all(Array.from({ length: 20 }, () => s.send()));
      expect(batch.every((r) => r.status === 202)).toBe(true);
    }
    // Kill it while attempts are at the endpoint and deliveries wait behind them.
    await waitFor(
      async () => {
        const [row] = await s.sql<Array<{ n: number }>>`select count(*)::int as n from webhook_deliveries`;
        return inFlight >= 4 && received.size >= 10 && (row?.n ?? 0) > inFlight ? true : undefined;
      },
      30_000,
      "webhook attempts in flight with a backlog",
      5,
    );
    const atKill = inFlight;
    await doomed.stop("SIGKILL");
    // The `/finals` deliveries the dead worker's appends wrote leased to it (sent or not): each
    // waits for its lease to run out before the second worker may claim it. (At WEBHOOK_LEASE_MS
    // 11000 a born lease is 21 s: the attempt's time-out and 11 s.)
    const [born] = await s.sql<Array<{ n: number }>>`
      select count(*)::int as n from webhook_deliveries
      where attempts = 0 and leased_until = next_attempt_at + interval '21 seconds'`;

    await s.startWorker();
    expect(await s.waitForFinal(s.accepted, 45_000)).toEqual([]);
    const events = await s.sql<Array<{ id: string; final: boolean }>>`
      select 'evt_' || message_id || '_' || seq as id, type in ('success', 'failed', 'rejected') as final
      from message_events
      where organization_id = ${s.organizationId} and webhook_event_type(type, data) is not null`;
    expect(events.length).toBe(MESSAGES * 2);
    const expected = [
      ...events.map(({ id }) => `/all ${id}`),
      ...events.filter(({ final }) => final).map(({ id }) => `/finals ${id}`),
    ];
    expect(expected.length).toBe(MESSAGES * 3);
    await waitFor(
      async () => {
        const [row] = await s.sql<Array<{ n: number }>>`select count(*)::int as n from webhook_deliveries`;
        return row?.n === 0 && inFlight === 0 ? true : undefined;
      },
      60_000,
      "every delivery made",
    );
    const missing = expected.filter((key) => !received.has(key));
    expect(missing).toEqual([]);
    for (const delivery of bodies) {
      new StandardWebhook(secrets.get(delivery.path) ?? "").verify(delivery.body, {
        "webhook-id": delivery.id,
        "webhook-timestamp": delivery.timestamp,
        "webhook-signature": delivery.signature,
      });
    }
    const duplicates = [...received.values()].filter((count) => count > 1).length;

    const audit = await s.audit();
    s.record(
      audit,
      `webhooks: ${expected.length} deliveries (${events.length} events to one endpoint, the final ones to another), ` +
        `${atKill} POSTs in flight and ${born?.n ?? 0} born leased to the dead worker at the kill, all delivered, ` +
        `${duplicates} twice`,
    );
    await expectSoundOutcome(s, audit);
  }, 150_000);
});
