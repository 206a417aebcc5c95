import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { Webhook as StandardWebhook } from "standardwebhooks";
import { v7 as uuidv7 } from "uuid";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import type { MessageEvent } from "../../../src/domain/events.js";
import { initialState } from "../../../src/domain/state.js";
import { createOutboundAgent, outboundPost } from "../../../src/runtime/outbound/outbound-fetch.js";
import { webhookSecrets } from "../../../src/runtime/webhook-secrets.js";
import { appendEvents, writeAppends, writeAppendsHandingOff } from "../../../src/store/events.js";
import {
  claimDueDeliveries,
  giveBackDeliveries,
  handedDelivery,
} from "../../../src/store/webhook-deliveries.js";
import {
  startWebhookDispatcher,
  type WebhookDispatcher,
  type WebhookDispatcherDeps,
  type WebhookHandoff,
} from "../../../workers/webhook-dispatcher.js";
import { acceptedSmsEvent } from "../../support/accepted-event.js";
import {
  createHarness,
  eventually,
  type Harness,
  onboard,
  sendSms,
  silentLogger,
} from "../../support/harness.js";
import { createOwnDatabase } from "../../support/own-database.js";

/**
 * The webhook handoff (docs/decisions/0036, "The handoff"): the delivery worker's appends write
 * the deliveries nothing holds back already leased to the worker and return them (the fan-out
 * trigger writes the others, db/migrations/0025_webhook-handoff-returned.sql), and the worker hands
 * them to its dispatcher, which POSTs them without a claim. First the rows an append writes and
 * returns and how a dispatcher gives them back; then the worker and the dispatcher together, every
 * delivery verified with the Standard Webhooks library. A database of this file's own: its
 * dispatchers claim every endpoint's rows.
 */

let own: Awaited<ReturnType<typeof createOwnDatabase>>;
let h: Harness;

const LEASE_MS = 60_000;

interface Received {
  path: string;
  headers: Record<string, string>;
  body: string;
  at: number;
}
const received: Received[] = [];
/** How long a path takes to answer, in ms. */
const delays = new Map<string, number>();
/** POSTs under way by path now, and the most there were at once. */
const underWay = new Map<string, number>();
const mostAtOnce = new Map<string, number>();
const receiver: Server = createServer((request: IncomingMessage, response: ServerResponse) => {
  const chunks: Buffer[] = [];
  request.on("data", (chunk: Buffer) => chunks.push(chunk));
  request.on("end", () => {
    const path = request.url ?? "";
    const headers = Object.fromEntries(Object.entries(request.headers).map(([k, v]) => [k, String(v)]));
    received.push({ path, headers, body: Buffer.concat(chunks).toString(), at: Date.now() });
    const now = (underWay.get(path) ?? 0) + 1;
    underWay.set(path, now);
    mostAtOnce.set(path, Math.max(now, mostAtOnce.get(path) ?? 0));
    setTimeout(() => {
      underWay.set(path, (underWay.get(path) ?? 1) - 1);
      response.writeHead(200).end("ok");
    }, delays.get(path) ?? 0);
  });
});
let base = "";

beforeAll(async () => {
  own = await createOwnDatabase("webhook_handoff");
  h = createHarness({
    DATABASE_URL: own.url,
    WEBHOOK_ALLOWED_NETWORKS: "127.0.0.1/32",
    WEBHOOK_ALLOWED_HOSTS: "127.0.0.1",
  });
  await new Promise<void>((resolve) => receiver.listen(0, "127.0.0.1", resolve));
  base = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}`;
});

afterAll(async () => {
  receiver.closeAllConnections();
  await new Promise<void>((resolve) => receiver.close(() => resolve()));
  await h?.close();
  await own?.drop();
});

async function createEndpoint(apiKey: string, path: string, events?: string[]) {
  const response = await h.app.request("/api/v1/webhooks/endpoints", {
    method: "POST",
    headers: { "x-api-key": apiKey, "content-type": "application/json" },
    body: JSON.stringify({ url: `${base}${path}`, events }),
  });
  expect(response.status, await response.clone().text()).toBe(201);
  return (await response.json()) as { id: string; secret: string };
}

interface Row {
  endpoint_id: string;
  message_id: string;
  seq: number;
  event_type: string;
  /** Whether the row was born leased: leased for exactly LEASE_MS after it was due. */
  born: boolean;
  /** Milliseconds of lease left (null when unleased). */
  lease_left_ms: number | null;
}

async function rowsOf(messageId: string): Promise<Row[]> {
  return h.sql<Row[]>`
    select endpoint_id, message_id, seq, event_type,
      coalesce(leased_until = next_attempt_at + ${LEASE_MS} * interval '1 millisecond', false) as born,
      (extract(epoch from leased_until - now()) * 1000)::float8 as lease_left_ms
    from webhook_deliveries where message_id = ${messageId} order by seq, endpoint_id`;
}

/** An SMS message of `organization` accepted (no handoff, as the API writes it); its events and state. */
async function accepted(organization: { id: string; productId: string }) {
  const id = uuidv7();
  const now = new Date();
  const events = [
    acceptedSmsEvent(id, organization, now.toISOString(), new Date(now.getTime() + 3_600_000).toISOString()),
  ];
  const state = await appendEvents(h.sql, initialState, events);
  return { id, state };
}

const at = () => new Date().toISOString();
const started: MessageEvent = {
  type: "pending",
  retryCount: 0,
  occurredAt: at(),
  data: { kind: "attempt_started", attempt: 1 },
};
const retryScheduled = (): MessageEvent => ({
  type: "pending",
  retryCount: 1,
  occurredAt: at(),
  data: {
    kind: "retry_scheduled",
    attempt: 1,
    error: { class: "transient", code: "http_503", message: "unavailable" },
    retryAt: new Date(Date.now() + 60_000).toISOString(),
  },
});
const succeeded = (id: string): MessageEvent => ({
  type: "success",
  retryCount: 0,
  occurredAt: at(),
  data: { attempt: 1, provider: "simulator", providerMessageId: `sim-${id}` },
});

describe("the fan-out of an append that hands off", () => {
  it("given endpoints of final events, of every event and of final events and receipts, then only the first's deliveries are born leased and returned, once each, and only in an append that hands off", async () => {
    const organization = await onboard(h);
    const finals = await createEndpoint(organization.apiKey, "/rows/finals", [
      "message.succeeded",
      "message.failed",
    ]);
    const all = await createEndpoint(organization.apiKey, "/rows/all");
    // A receipt may come before its message's final event (a provider's report racing the
    // worker's append): this endpoint's final delivery could wait behind one, so it is the claim's.
    const receipts = await createEndpoint(organization.apiKey, "/rows/receipts", [
      "message.succeeded",
      "message.delivered",
    ]);
    const one = await accepted(organization);
    const handed = await writeAppendsHandingOff(
      h.sql,
      [{ state: one.state, events: [started, succeeded(one.id)] }],
      LEASE_MS,
    );
    expect(handed.states.map((s) => s.version)).toEqual([3]);
    expect(handed.handed.map((r) => [r.endpoint_id, r.message_id, r.seq, r.event_type, r.url])).toEqual([
      [finals.id, one.id, 3, "message.succeeded", `${base}/rows/finals`],
    ]);
    // Two: a retry scheduled, in an append that hands off: no final event, nothing born.
    const two = await accepted(organization);
    const none = await writeAppendsHandingOff(
      h.sql,
      [{ state: two.state, events: [started, retryScheduled()] }],
      LEASE_MS,
    );
    expect(none.handed).toEqual([]);
    // Three: appended without a handoff, as every other writer does.
    const three = await accepted(organization);
    await writeAppends(h.sql, [{ state: three.state, events: [started, succeeded(three.id)] }]);

    const name = (id: string) =>
      id === finals.id ? "finals" : id === all.id ? "all" : id === receipts.id ? "receipts" : "?";
    const summary = (rows: Row[]) =>
      rows.map((r) => `${r.seq} ${name(r.endpoint_id)} ${r.born ? "born" : "unleased"}`).sort();
    const oneRows = await rowsOf(one.id);
    expect(summary(oneRows)).toEqual([
      "1 all unleased",
      "3 all unleased",
      "3 finals born",
      "3 receipts unleased",
    ]);
    expect(summary(await rowsOf(two.id))).toEqual(["1 all unleased", "3 all unleased"]);
    expect(summary(await rowsOf(three.id))).toEqual([
      "1 all unleased",
      "3 all unleased",
      "3 finals unleased",
      "3 receipts unleased",
    ]);
    // Born with the lease the append asked for.
    const born = oneRows.find((r) => r.born);
    expect(born?.lease_left_ms).toBeGreaterThan(LEASE_MS - 10_000);
    expect(born?.lease_left_ms).toBeLessThanOrEqual(LEASE_MS);
    // Every row is due; the born one alone is leased, so no claim may take it.
    const [claimable] = await h.sql<Array<{ n: number; due: number }>>`
      select count(*) filter (where leased_until is null or leased_until <= now())::int as n,
        count(*) filter (where next_attempt_at <= now())::int as due
      from webhook_deliveries where message_id = ${one.id}`;
    expect(claimable).toEqual({ n: 3, due: 4 });
    await h.sql`update webhook_endpoints set enabled = false where organization_id = ${organization.id}`;
  });

  it("given a handed delivery, then a give-back makes it claimable at once, and one after a claim's lease changes nothing", async () => {
    const organization = await onboard(h);
    const finals = await createEndpoint(organization.apiKey, "/read/finals", ["message.succeeded"]);
    await createEndpoint(organization.apiKey, "/read/all");
    const one = await accepted(organization);
    const { handed } = await writeAppendsHandingOff(
      h.sql,
      [{ state: one.state, events: [started, succeeded(one.id)] }],
      LEASE_MS,
    );
    // `all` takes every event: its success is written unleased, for the claim, and not returned.
    expect(handed.map((r) => [r.endpoint_id, r.seq])).toEqual([[finals.id, 3]]);
    const id = Number(handed[0]?.id);
    const claim = () =>
      claimDueDeliveries(h.sql, { limit: 10, perEndpoint: 4, inFlight: new Map(), leaseMs: 30_000 });
    // Born leased: no claim takes it.
    expect((await claim()).deliveries.map((d) => d.id)).not.toContain(id);

    // Given back: unleased and due, so the claim takes it now, not when the lease would have ended.
    await giveBackDeliveries(h.sql, [id], LEASE_MS);
    const claimed = (await claim()).deliveries.find((d) => d.id === id);
    expect([claimed?.endpointId, claimed?.seq]).toEqual([finals.id, 3]);
    // Leased by that claim now: a late give-back of the born lease leaves the claim's alone.
    await giveBackDeliveries(h.sql, [id], LEASE_MS);
    const [row] = await h.sql<Array<{ leased_until: string | null }>>`
      select leased_until::text from webhook_deliveries where id = ${id}`;
    expect(row?.leased_until).toBe(claimed?.leasedUntil);
    await h.sql`update webhook_endpoints set enabled = false where organization_id = ${organization.id}`;
  });
});

describe("the handoff's setting", () => {
  it("given an append that hands off and then one that does not, on the same connection and in one transaction, then the second is fanned out by the trigger, its delivery unleased", async () => {
    const organization = await onboard(h);
    await createEndpoint(organization.apiKey, "/scope/finals", ["message.succeeded"]);
    const one = await accepted(organization);
    const two = await accepted(organization);
    const three = await accepted(organization);
    const setting = async (tx: typeof h.sql) =>
      (
        await tx<Array<{ value: string | null }>>`
          select current_setting('notify.webhook_fan_out_written', true) as value`
      )[0]?.value;
    const connection = await h.sql.reserve();
    try {
      await writeAppendsHandingOff(
        connection,
        [{ state: one.state, events: [started, succeeded(one.id)] }],
        LEASE_MS,
      );
      expect(await setting(connection)).toBeFalsy();
      await writeAppends(connection, [{ state: two.state, events: [started, succeeded(two.id)] }]);
    } finally {
      connection.release();
    }
    // Inside an explicit transaction the trigger clears the setting it acted on: the next
    // statement is fanned out (a setting left would have it write no delivery at all).
    await h.sql.begin(async (transaction) => {
      const tx = transaction as unknown as typeof h.sql;
      const handed = await writeAppendsHandingOff(tx, [{ state: three.state, events: [started] }], LEASE_MS);
      expect(handed.handed).toEqual([]);
      expect(await setting(tx)).toBeFalsy();
      await writeAppends(tx, [
        { state: handed.states[0] as typeof three.state, events: [succeeded(three.id)] },
      ]);
    });
    expect((await rowsOf(one.id)).map((r) => r.born)).toEqual([true]);
    expect((await rowsOf(two.id)).map((r) => r.born)).toEqual([false]);
    expect((await rowsOf(three.id)).map((r) => [r.seq, r.born])).toEqual([[3, false]]);
    await h.sql`update webhook_endpoints set enabled = false where organization_id = ${organization.id}`;
  });
});

describe("the worker handing its events to its dispatcher", () => {
  let dispatcher: WebhookDispatcher | undefined;
  let worker: Awaited<ReturnType<Harness["startWorker"]>> | undefined;

  function start(
    options: Partial<WebhookDispatcherDeps>,
    handoff?: (d: WebhookDispatcher) => WebhookHandoff,
  ) {
    dispatcher = startWebhookDispatcher({
      sql: h.sql,
      logger: silentLogger,
      secrets: webhookSecrets(h.config),
      post: outboundPost(createOutboundAgent({ allowedNetworks: h.config.WEBHOOK_ALLOWED_NETWORKS })),
      newId: uuidv7,
      now: () => new Date(),
      random: Math.random,
      concurrency: 16,
      endpointConcurrency: 4,
      leaseMs: LEASE_MS,
      ...options,
    });
    worker = h.startWorker({ webhooks: handoff ? handoff(dispatcher) : dispatcher.handoff });
  }

  afterEach(async () => {
    await worker?.close();
    await dispatcher?.stop(0);
    await h.sql`update webhook_endpoints set enabled = false`;
  });

  async function sendAll(apiKey: string, count: number): Promise<string[]> {
    const ids: string[] = [];
    for (let i = 0; i < count; i++) {
      const response = await sendSms(h, apiKey, { payload: { to: "+14155550100", body: "code 1" } });
      expect(response.status).toBe(202);
      ids.push(((await response.json()) as { request_id: string }).request_id);
    }
    return ids;
  }

  /** Waits for one success POST per message at `path`; checks each with the standard's library. */
  async function succeededAt(path: string, secret: string, ids: string[]) {
    const deliveries = await eventually(
      async () => {
        const found = received.filter((r) => r.path === path);
        return found.length >= ids.length ? found : undefined;
      },
      15_000,
      `${ids.length} POSTs at ${path}`,
    );
    const bodies = deliveries.map((d) => {
      const body = new StandardWebhook(secret).verify(d.body, {
        "webhook-id": d.headers["webhook-id"] ?? "",
        "webhook-timestamp": d.headers["webhook-timestamp"] ?? "",
        "webhook-signature": d.headers["webhook-signature"] ?? "",
      }) as { type: string; data: { message_id: string; seq: number; status: string; channel: string } };
      expect(d.headers["webhook-id"]).toBe(`evt_${body.data.message_id}_${body.data.seq}`);
      return body;
    });
    expect(bodies.map((b) => [b.type, b.data.status, b.data.channel])).toEqual(
      ids.map(() => ["message.succeeded", "success", "sms"]),
    );
    // Once each: the born lease kept every other claim off.
    expect(new Set(bodies.map((b) => b.data.message_id))).toEqual(new Set(ids));
    return deliveries.map((d, i) => ({ at: d.at, messageId: bodies[i]?.data.message_id as string }));
  }

  /** Each message's success reached `path` exactly once. */
  function onceEach(path: string, ids: string[]) {
    const ofPath = received.filter((r) => r.path === path).map((r) => r.headers["webhook-id"]);
    expect(ofPath.length).toBe(ids.length);
    expect(new Set(ofPath).size).toBe(ids.length);
  }

  async function settled(endpointId: string, count: number) {
    await eventually(
      async () => {
        const [row] = await h.sql<Array<{ left: number; attempts: number }>>`
          select (select count(*) from webhook_deliveries where endpoint_id = ${endpointId})::int as left,
            (select count(*) from webhook_attempts where endpoint_id = ${endpointId} and status_code = 200)::int as attempts`;
        return row?.left === 0 && row.attempts === count ? true : undefined;
      },
      10_000,
      "settled",
    );
  }

  it("given a claim that would not come for a minute, then the final events are POSTed at once all the same, signed, and settled", async () => {
    // One claim at the start, then none for a minute: only the handoff can deliver in time, and
    // without it the born leases would keep the rows from any claim for 21 s.
    // At the shortest WEBHOOK_LEASE_MS (11 s): the born lease still leaves the start its window.
    start({ leaseMs: 11_000, idleMs: { min: 60_000, max: 60_000 } });
    const organization = await onboard(h);
    const endpoint = await createEndpoint(organization.apiKey, "/handed", [
      "message.succeeded",
      "message.failed",
    ]);
    const ids = await sendAll(organization.apiKey, 3);
    await succeededAt("/handed", endpoint.secret, ids);
    await settled(endpoint.id, 3);
    onceEach("/handed", ids);
  });

  it("given an endpoint at its cap, then the handed deliveries it cannot take now are given back and claimed, not left to their leases", async () => {
    start({ endpointConcurrency: 1, idleMs: { min: 10, max: 50 } });
    delays.set("/capped", 300);
    const organization = await onboard(h);
    const endpoint = await createEndpoint(organization.apiKey, "/capped", ["message.succeeded"]);
    const sentAt = Date.now();
    const ids = await sendAll(organization.apiKey, 4);
    const deliveries = await succeededAt("/capped", endpoint.secret, ids);
    // One at a time (300 ms each), well before the minute's lease would have run out.
    expect(Math.max(...deliveries.map((d) => d.at)) - sentAt).toBeLessThan(15_000);
    expect(mostAtOnce.get("/capped")).toBe(1);
    await settled(endpoint.id, 4);
    onceEach("/capped", ids);
  });

  it("given a handed delivery with less lease left than an attempt takes, then it is given back, not POSTed", async () => {
    // No claim at all (its database gate stays shut): what is given back waits, unleased, and
    // nothing POSTs it. A handoff does not ask the gate.
    start({
      database: {
        available: false,
        reportFailure: () => false,
        waitUntilAvailable: async (ms) => {
          await new Promise((resolve) => setTimeout(resolve, Math.min(ms, 50)));
          return false;
        },
      },
    });
    const organization = await onboard(h);
    await createEndpoint(organization.apiKey, "/late", ["message.succeeded"]);
    const one = await accepted(organization);
    const { states, handed } = await writeAppendsHandingOff(
      h.sql,
      [{ state: one.state, events: [started, succeeded(one.id)] }],
      (dispatcher as WebhookDispatcher).handoff.leaseMs,
    );
    const [row] = handed;
    const message = (states[0] as Extract<(typeof states)[number], { message: unknown }>).message;
    // As if the append had taken all but 5 s of its lease: less than an attempt's 10 s time-out.
    const late = handedDelivery(
      { ...(row as (typeof handed)[number]), lease_left_ms: 5_000 },
      {
        message: { ...message, messageId: message.id },
        event: { ...succeeded(one.id), seq: 3 },
      },
    );
    (dispatcher as WebhookDispatcher).handoff.handOff([late]);
    await eventually(
      async () => ((await rowsOf(one.id))[0]?.lease_left_ms === null ? true : undefined),
      5_000,
      "given back",
    );
    expect(received.filter((r) => r.path === "/late")).toEqual([]);
  });

  it("given a handoff that never comes (a crash after the append's commit), then the deliveries are claimed once their leases run out, once each", async () => {
    const leaseMs = 1_500;
    start(
      { leaseMs, attemptTimeoutMs: 200, idleMs: { min: 10, max: 50 } },
      // The appends ask for the lease; their events go nowhere.
      () => ({ leaseMs, handOff: () => {} }),
    );
    const organization = await onboard(h);
    const endpoint = await createEndpoint(organization.apiKey, "/lost", ["message.succeeded"]);
    const ids = await sendAll(organization.apiKey, 2);
    const deliveries = await succeededAt("/lost", endpoint.secret, ids);
    const events = await h.sql<Array<{ message_id: string; at: number }>>`
      select message_id, (extract(epoch from occurred_at) * 1000)::float8 as at from message_events
      where message_id = any(${ids}::uuid[]) and type = 'success'`;
    const eventAt = new Map(events.map((e) => [e.message_id, e.at]));
    // Not before its born lease ran out: the lease starts at the append's commit, after the event's time.
    for (const delivery of deliveries) {
      expect(delivery.at - (eventAt.get(delivery.messageId) ?? Number.NaN)).toBeGreaterThanOrEqual(leaseMs);
    }
    await settled(endpoint.id, 2);
    onceEach("/lost", ids);
  });
});
