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
 * once, each verified with the Standard Webhooks library.
 */
const MESSAGES = 60;
let s: FaultScenario;
let endpointUrl = "";
/** Every delivery the endpoint received, by `webhook-id`. */
const received = new Map<string, number>();
let inFlight = 0;
let secret = "";
const bodies: Array<{ id: string; timestamp: string; signature: string; body: string }> = [];

/** An endpoint that answers 200 after 300 ms, so that many attempts are under way at the kill. */
const endpoint: Server = createServer((request, response) => {
  const chunks: Buffer[] = [];
  inFlight++;
  request.on("data", (chunk: Buffer) => chunks.push(chunk));
  request.on("end", () => {
    setTimeout(() => {
      inFlight--;
      const id = String(request.headers["webhook-id"]);
      received.set(id, (received.get(id) ?? 0) + 1);
      bodies.push({
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
  endpointUrl = `http://127.0.0.1:${(endpoint.address() as AddressInfo).port}/hook`;
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
  const created = await fetch(`${s.base}/api/v1/webhooks/endpoints`, {
    method: "POST",
    headers: { "content-type": "application/json", "x-api-key": s.apiKey },
    body: JSON.stringify({ url: endpointUrl }),
  });
  expect(created.status).toBe(201);
  secret = ((await created.json()) as { secret: string }).secret;
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

    await s.startWorker();
    expect(await s.waitForFinal(s.accepted, 45_000)).toEqual([]);
    const events = await s.sql<Array<{ id: string }>>`
      select 'evt_' || message_id || '_' || seq as id from message_events
      where organization_id = ${s.organizationId} and webhook_event_type(type, data) is not null`;
    expect(events.length).toBe(MESSAGES * 2);
    await waitFor(
      async () => {
        const [row] = await s.sql<Array<{ n: number }>>`select count(*)::int as n from webhook_deliveries`;
        return row?.n === 0 && inFlight === 0 ? true : undefined;
      },
      60_000,
      "every delivery made",
    );
    const missing = events.filter(({ id }) => !received.has(id));
    expect(missing).toEqual([]);
    const verifier = new StandardWebhook(secret);
    for (const delivery of bodies) {
      verifier.verify(delivery.body, {
        "webhook-id": delivery.id,
        "webhook-timestamp": delivery.timestamp,
        "webhook-signature": delivery.signature,
      });
    }
    const duplicates = [...received.values()].filter((count) => count > 1).length;

    const audit = await s.audit();
    s.record(
      audit,
      `webhooks: ${events.length} events, ${atKill} POSTs in flight at the kill, all delivered, ${duplicates} twice`,
    );
    await expectSoundOutcome(s, audit);
  }, 150_000);
});
