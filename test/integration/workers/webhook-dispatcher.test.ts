import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { Webhook as StandardWebhook } from "standardwebhooks";
import { Webhook as SvixWebhook } from "svix";
import { v7 as uuidv7 } from "uuid";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { createMetrics } from "../../../src/observability/metrics.js";
import { createOutboundAgent, outboundPost } from "../../../src/runtime/outbound/outbound-fetch.js";
import { webhookSecrets } from "../../../src/runtime/webhook-secrets.js";
import {
  claimDueDeliveries,
  type DeliverySettlement,
  settleDeliveries,
} from "../../../src/store/webhook-deliveries.js";
import {
  startWebhookDispatcher,
  type WebhookDispatcher,
  type WebhookDispatcherDeps,
} from "../../../workers/webhook-dispatcher.js";
import { purgeWebhookRows } from "../../../workers/webhook-purger.js";
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
 * The webhook dispatcher (docs/decisions/0036) against the real stack: messages accepted by the
 * API and delivered by the worker, whose events the fan-out trigger turns into deliveries, which
 * the dispatcher POSTs to HTTP receivers on 127.0.0.1. Every delivery is verified with the
 * Standard Webhooks library and svix's, never the service's own code. A database of this file's
 * own: its dispatchers claim every endpoint's deliveries, so no other file's may be in it.
 */

let own: Awaited<ReturnType<typeof createOwnDatabase>>;
let h: Harness;

interface Received {
  path: string;
  headers: Record<string, string>;
  body: string;
}

/** How a path answers the n-th POST of one `webhook-id` (0 for the first). */
type Answer = { status: number; headers?: Record<string, string> } | "hang";
const behaviours = new Map<string, (attempt: number) => Answer>();
const received: Received[] = [];
const hanging: ServerResponse[] = [];

const receiver: Server = createServer((request: IncomingMessage, response: ServerResponse) => {
  const chunks: Buffer[] = [];
  request.on("data", (chunk: Buffer) => chunks.push(chunk));
  request.on("end", () => {
    const headers = Object.fromEntries(
      Object.entries(request.headers).map(([name, value]) => [name, String(value)]),
    );
    const path = request.url ?? "";
    const attempt = received.filter(
      (r) => r.path === path && r.headers["webhook-id"] === headers["webhook-id"],
    ).length;
    received.push({ path, headers, body: Buffer.concat(chunks).toString() });
    const answer = behaviours.get(path)?.(attempt) ?? { status: 200 };
    if (answer === "hang") return void hanging.push(response);
    response.writeHead(answer.status, answer.headers).end("ok");
  });
});
let base = "";

const dispatchers: WebhookDispatcher[] = [];
/** A dispatcher on this file's database, through the outbound guard allowing 127.0.0.1, with a short schedule. */
function dispatcher(options: Partial<WebhookDispatcherDeps> = {}): WebhookDispatcher {
  const started = startWebhookDispatcher({
    sql: h.sql,
    logger: silentLogger,
    secrets: webhookSecrets(h.config),
    post: outboundPost(createOutboundAgent({ allowedNetworks: h.config.WEBHOOK_ALLOWED_NETWORKS })),
    newId: uuidv7,
    now: () => new Date(),
    random: Math.random,
    concurrency: 16,
    endpointConcurrency: 4,
    retryDelaysMs: [100, 100, 100],
    idleMs: { min: 10, max: 50 },
    ...options,
  });
  dispatchers.push(started);
  return started;
}

async function stopDispatchers(): Promise<void> {
  await Promise.all(dispatchers.splice(0).map((d) => d.stop(0)));
}

beforeAll(async () => {
  own = await createOwnDatabase("webhooks");
  h = createHarness({
    DATABASE_URL: own.url,
    WEBHOOK_ALLOWED_NETWORKS: "127.0.0.1/32",
    WEBHOOK_ALLOWED_HOSTS: "127.0.0.1",
  });
  await new Promise<void>((resolve) => receiver.listen(0, "127.0.0.1", resolve));
  base = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}`;
  h.startWorker();
});

/** After each test: its dispatchers stopped, and its endpoints disabled so no later one claims what it left. */
afterEach(async () => {
  await stopDispatchers();
  for (const response of hanging.splice(0)) response.destroy();
  await h.sql`update webhook_endpoints set enabled = false`;
});

afterAll(async () => {
  await stopDispatchers();
  for (const response of hanging) response.destroy();
  receiver.closeAllConnections();
  await new Promise<void>((resolve) => receiver.close(() => resolve()));
  await h?.close();
  await own?.drop();
});

function call(apiKey: string, method: string, path: string, body?: unknown) {
  return Promise.resolve(
    h.app.request(path, {
      method,
      headers: { "x-api-key": apiKey, ...(body === undefined ? {} : { "content-type": "application/json" }) },
      body: body === undefined ? undefined : JSON.stringify(body),
    }),
  );
}

async function createEndpoint(apiKey: string, path: string, events?: string[]) {
  const response = await call(apiKey, "POST", "/api/v1/webhooks/endpoints", {
    url: `${base}${path}`,
    events,
  });
  expect(response.status, await response.clone().text()).toBe(201);
  return (await response.json()) as { id: string; secret: string };
}

async function send(apiKey: string, to = "+14155550100", body = "Your code is 123456"): Promise<string> {
  const response = await sendSms(h, apiKey, { payload: { to, body }, retry_enabled: true });
  expect(response.status).toBe(202);
  return ((await response.json()) as { request_id: string }).request_id;
}

interface Body {
  type: string;
  timestamp: string;
  data: Record<string, unknown> & { message_id: string; organization_id: string; seq: number };
}

/** Verifies a delivery with both libraries and returns its body (throws if either refuses it). */
function verified(secret: string, delivery: Received): Body {
  const headers = {
    "webhook-id": delivery.headers["webhook-id"] ?? "",
    "webhook-timestamp": delivery.headers["webhook-timestamp"] ?? "",
    "webhook-signature": delivery.headers["webhook-signature"] ?? "",
  };
  const standard = new StandardWebhook(secret).verify(delivery.body, headers) as Body;
  expect(new SvixWebhook(secret).verify(delivery.body, headers)).toEqual(standard);
  return standard;
}

const at = (path: string) => received.filter((r) => r.path === path);
/** The distinct `webhook-id`s a path received. */
const idsAt = (path: string) => new Set(at(path).map((r) => r.headers["webhook-id"]));

/** The sendable events of the messages (what the fan-out makes deliveries of), as `webhook-id`s. */
async function sendableEvents(messageIds: string[], types?: string[]): Promise<Set<string>> {
  const rows = await h.sql<Array<{ id: string }>>`
    select 'evt_' || message_id || '_' || seq as id from message_events
    where message_id = any(${messageIds}::uuid[]) and webhook_event_type(type, data) is not null
      and (${types ?? null}::text[] is null or webhook_event_type(type, data) = any(${types ?? null}::text[]))`;
  return new Set(rows.map((row) => row.id));
}

/** Waits until every message is final (so its events are all written). */
async function final(messageIds: string[]): Promise<void> {
  await eventually(
    async () => {
      const [row] = await h.sql<Array<{ n: number }>>`
      select count(*)::int as n from messages
      where message_id = any(${messageIds}::uuid[]) and status in ('success', 'failed', 'rejected')`;
      return row?.n === messageIds.length ? true : undefined;
    },
    20_000,
    "messages final",
  );
}

async function receivedAll(path: string, expected: Set<string>, what: string): Promise<void> {
  await eventually(
    async () => ([...expected].every((id) => idsAt(path).has(id)) ? true : undefined),
    20_000,
    what,
  );
}

async function deliveriesLeft(endpointId: string): Promise<number> {
  const [row] = await h.sql<Array<{ n: number }>>`
    select count(*)::int as n from webhook_deliveries where endpoint_id = ${endpointId}`;
  return row?.n ?? 0;
}

async function attemptsOf(endpointId: string) {
  return h.sql<
    Array<{
      event_id: string;
      status_code: number | null;
      error_class: string | null;
      /** Epoch milliseconds (the harness's client reads dates as text). */
      attempted_at: number;
      next_retry_at: number | null;
      gave_up: boolean;
    }>
  >`select event_id, status_code, error_class, gave_up,
      (extract(epoch from attempted_at) * 1000)::float8 as attempted_at,
      (extract(epoch from next_retry_at) * 1000)::float8 as next_retry_at
    from webhook_attempts where endpoint_id = ${endpointId} order by attempted_at, id`;
}

async function endpointRow(id: string) {
  const [row] = await h.sql<
    Array<{ enabled: boolean; disabled_reason: string | null; failing_since: number | null }>
  >`
    select enabled, disabled_reason, (extract(epoch from failing_since) * 1000)::float8 as failing_since
    from webhook_endpoints where id = ${id}`;
  return row;
}

describe("webhook dispatcher", () => {
  it("given two organizations' endpoints, when messages flow, then each gets its own events, signed, without recipient or text, in seq order, filtered by events", async () => {
    const [one, two] = await Promise.all([onboard(h), onboard(h)]);
    const all = await createEndpoint(one.apiKey, "/one/all");
    const succeededOnly = await createEndpoint(one.apiKey, "/one/succeeded", ["message.succeeded"]);
    const theirs = await createEndpoint(two.apiKey, "/two/all");
    dispatcher();

    // +15005550501 fails once, then succeeds: accepted, retry_scheduled, succeeded.
    const ours = [
      await send(one.apiKey, "+15005550501", "secret text one"),
      await send(one.apiKey, "+14155550123", "secret text two"),
      await send(one.apiKey, "+15005550501", "secret text three"),
    ];
    const others = [await send(two.apiKey, "+14155550999", "their text")];
    await final([...ours, ...others]);

    const ourEvents = await sendableEvents(ours);
    expect(ourEvents.size).toBe(8); // 3 + 2 + 3: two messages retried once, one straight
    await receivedAll("/one/all", ourEvents, "organization one's events");
    await receivedAll(
      "/one/succeeded",
      await sendableEvents(ours, ["message.succeeded"]),
      "succeeded events",
    );
    await receivedAll("/two/all", await sendableEvents(others), "organization two's events");

    for (const [path, secret, organizationId, messageIds] of [
      ["/one/all", all.secret, one.id, ours],
      ["/one/succeeded", succeededOnly.secret, one.id, ours],
      ["/two/all", theirs.secret, two.id, others],
    ] as const) {
      const seenSeqs = new Map<string, number>();
      for (const delivery of at(path)) {
        const body = verified(secret, delivery);
        expect(body.data.organization_id).toBe(organizationId);
        expect(messageIds).toContain(body.data.message_id);
        expect(delivery.headers["webhook-id"]).toBe(`evt_${body.data.message_id}_${body.data.seq}`);
        expect(delivery.body).not.toMatch(/text|\+1415|\+1500/);
        // Per message, in seq order as they arrived (this endpoint kept up).
        expect(body.data.seq).toBeGreaterThan(seenSeqs.get(body.data.message_id) ?? 0);
        seenSeqs.set(body.data.message_id, body.data.seq);
      }
    }
    expect(at("/one/succeeded").map((d) => (JSON.parse(d.body) as Body).type)).toEqual(
      ours.map(() => "message.succeeded"),
    );
    const retried = at("/one/all")
      .map((d) => JSON.parse(d.body) as Body)
      .filter((b) => b.data.message_id === ours[0]);
    expect(retried.map((b) => b.type)).toEqual([
      "message.accepted",
      "message.retry_scheduled",
      "message.succeeded",
    ]);
    expect(retried[2]?.data).toMatchObject({
      channel: "sms",
      status: "success",
      retry_count: 1,
      provider: "simulator",
      priority: expect.any(String),
    });
    expect(retried[1]?.data).toMatchObject({
      status: "pending",
      error: { class: "transient", code: "simulated_outage" },
      next_attempt_at: expect.any(String),
    });

    await eventually(
      async () => ((await deliveriesLeft(all.id)) === 0 ? true : undefined),
      10_000,
      "none left",
    );
    const attempts = await attemptsOf(all.id);
    expect(attempts.every((a) => a.status_code === 200 && a.error_class === null && !a.gave_up)).toBe(true);
  });

  it("given an endpoint at its cap freeing a slot, then its next due delivery is claimed at once, not at the next settle or the end of a pause", async () => {
    const org = await onboard(h);
    const endpoint = await createEndpoint(org.apiKey, "/paced", ["message.succeeded"]);
    const ids = await Promise.all(Array.from({ length: 6 }, () => send(org.apiKey)));
    await final(ids);
    const events = await sendableEvents(ids, ["message.succeeded"]);
    expect(events.size).toBe(6);
    // Settles wait behind a lock on the attempts' table: only the slots freed by the successes
    // can wake the loop, whose pauses last 20 s.
    const locker = await h.sql.reserve();
    try {
      await locker`begin`;
      await locker`lock table webhook_attempts in exclusive mode`;
      dispatcher({ endpointConcurrency: 2, idleMs: { min: 20_000, max: 20_000 } });
      // Two at a time: without the wake, two and then a 20 s pause.
      await eventually(async () => (at("/paced").length >= 6 ? true : undefined), 10_000, "all six POSTed");
      expect(new Set(at("/paced").map((r) => r.headers["webhook-id"]))).toEqual(events);
    } finally {
      await locker`rollback`;
      locker.release();
    }
    await eventually(
      async () => ((await deliveriesLeft(endpoint.id)) === 0 ? true : undefined),
      10_000,
      "settled once the lock is gone",
    );
  });

  it("given two dispatchers at once, then each event is claimed by one of them and POSTed once", async () => {
    const org = await onboard(h);
    const endpoint = await createEndpoint(org.apiKey, "/shared");
    dispatcher({ endpointConcurrency: 2 });
    dispatcher({ endpointConcurrency: 2 });
    const ids = await Promise.all(Array.from({ length: 30 }, () => send(org.apiKey)));
    await final(ids);
    const events = await sendableEvents(ids);

    await receivedAll("/shared", events, "every event");
    await eventually(
      async () => ((await deliveriesLeft(endpoint.id)) === 0 ? true : undefined),
      10_000,
      "settled",
    );
    expect(at("/shared")).toHaveLength(events.size);
    expect((await attemptsOf(endpoint.id)).map((a) => a.status_code)).toEqual([...events].map(() => 200));
  });

  it("given an endpoint answering 500 once per event, then each event is retried on the schedule and delivered, and the endpoint is not failing after", async () => {
    const org = await onboard(h);
    const endpoint = await createEndpoint(org.apiKey, "/flaky");
    behaviours.set("/flaky", (attempt) => ({ status: attempt === 0 ? 500 : 204 }));
    dispatcher();
    const id = await send(org.apiKey);
    await final([id]);
    const events = await sendableEvents([id]);

    await receivedAll("/flaky", events, "events after a retry");
    await eventually(
      async () => ((await deliveriesLeft(endpoint.id)) === 0 ? true : undefined),
      10_000,
      "settled",
    );
    const attempts = await attemptsOf(endpoint.id);
    for (const eventId of events) {
      const its = attempts.filter((a) => a.event_id === eventId);
      expect(its.map((a) => a.status_code)).toEqual([500, 204]);
      expect(its[0]?.error_class).toBe("http");
      expect(its[0]?.next_retry_at).not.toBeNull();
      expect(its[1]?.attempted_at).toBeGreaterThanOrEqual(its[0]?.next_retry_at ?? Infinity);
    }
    for (const delivery of at("/flaky")) verified(endpoint.secret, delivery);
    expect((await endpointRow(endpoint.id))?.failing_since).toBeNull();
  });

  it("given an endpoint that always fails, then after the last delay the event is given up, visible in its attempts", async () => {
    const org = await onboard(h);
    const endpoint = await createEndpoint(org.apiKey, "/down", ["message.succeeded"]);
    behaviours.set("/down", () => ({ status: 502 }));
    dispatcher({ retryDelaysMs: [20, 20] });
    const id = await send(org.apiKey);
    await final([id]);

    await eventually(
      async () => ((await deliveriesLeft(endpoint.id)) === 0 ? true : undefined),
      10_000,
      "given up",
    );
    const attempts = await attemptsOf(endpoint.id);
    expect(attempts.map((a) => [a.status_code, a.next_retry_at !== null, a.gave_up])).toEqual([
      [502, true, false],
      [502, true, false],
      [502, false, true],
    ]);
    const row = await endpointRow(endpoint.id);
    expect(row).toMatchObject({ enabled: true, disabled_reason: null });
    expect(row?.failing_since).toEqual(attempts[0]?.attempted_at);
    // The API shows it: newest first, the last attempt given up.
    const listed = await call(org.apiKey, "GET", `/api/v1/webhooks/endpoints/${endpoint.id}/attempts`);
    const { attempts: records } = (await listed.json()) as {
      attempts: Array<{ gave_up: boolean; next_retry_at: string | null; error: { class: string } | null }>;
    };
    expect(records.map((a) => [a.gave_up, a.next_retry_at === null, a.error?.class])).toEqual([
      [true, true, "http"],
      [false, false, "http"],
      [false, false, "http"],
    ]);
  });

  it("given an endpoint failing without a success for longer than 5 days, when one more attempt fails, then it is disabled as failing and its waiting deliveries are dropped", async () => {
    const org = await onboard(h);
    const endpoint = await createEndpoint(org.apiKey, "/dead", ["message.accepted"]);
    behaviours.set("/dead", () => ({ status: 500 }));
    await h.sql`update webhook_endpoints set failing_since = now() - interval '5 days 1 minute'
      where id = ${endpoint.id}`;
    dispatcher();
    await send(org.apiKey);

    await eventually(
      async () => ((await endpointRow(endpoint.id))?.enabled === false ? true : undefined),
      10_000,
      "disabled",
    );
    expect(await endpointRow(endpoint.id)).toMatchObject({ enabled: false, disabled_reason: "failing" });
    const attempts = await attemptsOf(endpoint.id);
    expect(attempts).toHaveLength(1);
    expect(attempts[0]).toMatchObject({ status_code: 500, gave_up: false });
    expect(await deliveriesLeft(endpoint.id)).toBe(0);
    const read = await call(org.apiKey, "GET", `/api/v1/webhooks/endpoints/${endpoint.id}`);
    expect(await read.json()).toMatchObject({ enabled: false, disabled_reason: "failing" });
  });

  it("given a success after failures, then the endpoint's failing time is cleared", async () => {
    const org = await onboard(h);
    const endpoint = await createEndpoint(org.apiKey, "/recovered", ["message.accepted"]);
    await h.sql`update webhook_endpoints set failing_since = now() - interval '1 day' where id = ${endpoint.id}`;
    dispatcher();
    await send(org.apiKey);

    await eventually(
      async () => ((await deliveriesLeft(endpoint.id)) === 0 ? true : undefined),
      10_000,
      "delivered",
    );
    expect(await endpointRow(endpoint.id)).toMatchObject({ enabled: true, failing_since: null });
  });

  it("counts attempts by outcome, the lag to a 2xx, the backlog (of enabled endpoints) and the endpoints disabled", async () => {
    const org = await onboard(h);
    // A delivery of a disabled endpoint (written as it was disabled): never sent, not counted.
    const off = await createEndpoint(org.apiKey, "/metrics/off", ["message.accepted"]);
    await h.sql`update webhook_endpoints set enabled = false where id = ${off.id}`;
    await h.sql`insert into webhook_deliveries (endpoint_id, organization_id, message_id, seq, event_type, event_at)
      values (${off.id}, ${org.id}, ${uuidv7()}, 1, 'message.accepted', now())`;
    const ok = await createEndpoint(org.apiKey, "/metrics/ok", ["message.accepted"]);
    const gone = await createEndpoint(org.apiKey, "/metrics/gone", ["message.accepted"]);
    behaviours.set("/metrics/gone", () => ({ status: 410 }));
    const metrics = createMetrics({ process: "worker", db: h.db });
    dispatcher({ metrics, endpointConcurrency: 1 });
    await Promise.all([send(org.apiKey), send(org.apiKey)]);

    await eventually(
      async () => ((await deliveriesLeft(ok.id)) === 0 ? true : undefined),
      10_000,
      "delivered",
    );
    await eventually(
      async () => ((await endpointRow(gone.id))?.enabled === false ? true : undefined),
      10_000,
      "disabled",
    );
    const text = await metrics.registry.metrics();
    const sample = (name: string, labels: Record<string, string> = {}) => {
      const wanted = Object.entries(labels).map(([k, v]) => `${k}="${v}"`);
      const line = text.split("\n").find((l) => {
        const match = /^([^{ ]+)\{([^}]*)\} /.exec(l);
        return match?.[1] === name && wanted.every((pair) => match[2]?.split(",").includes(pair));
      });
      return line ? Number(line.split(" ").at(-1)) : undefined;
    };
    expect(sample("notification_webhook_attempts_total", { outcome: "success" })).toBe(2);
    // One 410: the endpoint's slot is held until it is settled, and then the endpoint is disabled.
    expect(sample("notification_webhook_attempts_total", { outcome: "http" })).toBe(1);
    expect(sample("notification_webhook_delivery_lag_seconds_count")).toBe(2);
    expect(sample("notification_webhook_endpoints_disabled", { reason: "gone" })).toBeGreaterThanOrEqual(1);
    const [left] = await h.sql<Array<{ n: number }>>`
      select count(*)::int as n from webhook_deliveries d join webhook_endpoints w on w.id = d.endpoint_id and w.enabled`;
    expect(await deliveriesLeft(off.id)).toBe(1);
    expect(sample("notification_webhook_deliveries_backlog", { state: "waiting" })).toBe(left?.n);
  });

  it("given an endpoint answering 410, then it is disabled, the event given up, the rest dropped; re-enabling it does not resume them, recovering does", async () => {
    const org = await onboard(h);
    const endpoint = await createEndpoint(org.apiKey, "/gone");
    behaviours.set("/gone", () => ({ status: 410 }));
    const ids = await Promise.all([send(org.apiKey), send(org.apiKey), send(org.apiKey)]);
    await final(ids);
    const events = await sendableEvents(ids);
    expect(await deliveriesLeft(endpoint.id)).toBe(events.size);
    dispatcher({ endpointConcurrency: 1 });

    await eventually(
      async () => ((await endpointRow(endpoint.id))?.enabled === false ? true : undefined),
      10_000,
      "disabled",
    );
    expect(await endpointRow(endpoint.id)).toMatchObject({ enabled: false, disabled_reason: "gone" });
    const attempts = await attemptsOf(endpoint.id);
    expect(attempts).toHaveLength(1);
    expect(attempts[0]).toMatchObject({ status_code: 410, gave_up: true, next_retry_at: null });
    // Dropped with the disable, in the same statement.
    expect(await deliveriesLeft(endpoint.id)).toBe(0);

    behaviours.set("/gone", () => ({ status: 200 }));
    const patched = await call(org.apiKey, "PATCH", `/api/v1/webhooks/endpoints/${endpoint.id}`, {
      enabled: true,
    });
    expect(patched.status).toBe(200);
    // Re-enabled: nothing resumes (a new event would be sent; the missed ones wait for a recover).
    expect(await deliveriesLeft(endpoint.id)).toBe(0);
    expect(at("/gone")).toHaveLength(1);

    const recovered = await call(org.apiKey, "POST", `/api/v1/webhooks/endpoints/${endpoint.id}/recover`, {
      since: new Date(Date.now() - 3_600_000).toISOString(),
    });
    expect(recovered.status, await recovered.clone().text()).toBe(202);
    await receivedAll("/gone", events, "recovered events");
    await eventually(
      async () => ((await deliveriesLeft(endpoint.id)) === 0 ? true : undefined),
      10_000,
      "recovered and settled",
    );
  });

  it("given a 503 with Retry-After longer than the schedule, then the retry waits for it", async () => {
    const org = await onboard(h);
    const endpoint = await createEndpoint(org.apiKey, "/busy", ["message.accepted"]);
    behaviours.set("/busy", (attempt) =>
      attempt === 0 ? { status: 503, headers: { "retry-after": "2" } } : { status: 200 },
    );
    dispatcher();
    const id = await send(org.apiKey);

    await eventually(
      async () => ((await deliveriesLeft(endpoint.id)) === 0 ? true : undefined),
      15_000,
      "delivered",
    );
    const attempts = await attemptsOf(endpoint.id);
    expect(attempts.map((a) => a.status_code)).toEqual([503, 200]);
    const [first, second] = attempts;
    const waited = (first?.next_retry_at ?? 0) - (first?.attempted_at ?? 0);
    expect(waited).toBeGreaterThanOrEqual(2000);
    expect(second?.attempted_at).toBeGreaterThanOrEqual(first?.next_retry_at ?? Infinity);
    expect(idsAt("/busy")).toEqual(new Set([`evt_${id}_1`]));
  });

  it("given organization A's endpoint hanging, then organization B's events are all delivered while A's hold only A's slots", async () => {
    const [a, b] = await Promise.all([onboard(h), onboard(h)]);
    const hangingEndpoint = await createEndpoint(a.apiKey, "/a/hang", ["message.accepted"]);
    const healthy = await createEndpoint(b.apiKey, "/b/ok", ["message.accepted"]);
    behaviours.set("/a/hang", () => "hang");
    const theirs = await Promise.all(Array.from({ length: 12 }, () => send(a.apiKey)));
    // A's backlog is older than B's: B's events come after it.
    const ours = await Promise.all(Array.from({ length: 12 }, () => send(b.apiKey)));
    const d = dispatcher({
      concurrency: 8,
      endpointConcurrency: 4,
      attemptTimeoutMs: 60_000,
      leaseMs: 120_000,
    });

    await receivedAll("/b/ok", new Set(ours.map((id) => `evt_${id}_1`)), "B's events");
    for (const delivery of at("/b/ok")) verified(healthy.secret, delivery);
    // A still holds its 4 slots, no more, and the rest of its backlog waits.
    await eventually(async () => (at("/a/hang").length >= 4 ? true : undefined), 10_000, "A's 4 attempts");
    expect(at("/a/hang")).toHaveLength(4);
    expect(await deliveriesLeft(hangingEndpoint.id)).toBe(theirs.length);
    await eventually(
      async () => ((await deliveriesLeft(healthy.id)) === 0 ? true : undefined),
      10_000,
      "B settled",
    );
    // Once B's attempts are settled, only A's 4 remain in flight (they never leave: A never answers).
    await eventually(
      async () => (d.inFlight === 4 ? true : undefined),
      10_000,
      "only A's attempts in flight",
    );
  });

  it("given a worker that claimed deliveries and died, then another delivers them once the lease is over, in order", async () => {
    const org = await onboard(h);
    const endpoint = await createEndpoint(org.apiKey, "/lease");
    const id = await send(org.apiKey);
    await final([id]);
    // The dead worker: it claimed (and leased) what was due, and never POSTed nor settled it.
    const { deliveries: claimed } = await claimDueDeliveries(h.sql, {
      limit: 10,
      perEndpoint: 4,
      inFlight: new Map(),
      leaseMs: 1500,
    });
    // Only the accepted event: the later ones wait while it is in flight.
    expect(claimed.map((c) => [c.messageId, c.seq])).toEqual([[id, 1]]);
    const [lease] = await h.sql<Array<{ until: number; leased: boolean }>>`
      select (extract(epoch from leased_until) * 1000)::float8 as until, leased_until is not null as leased
      from webhook_deliveries where id = ${claimed[0]?.id ?? 0}`;
    expect(lease?.leased).toBe(true);
    dispatcher({ attemptTimeoutMs: 1000, leaseMs: 1500 });

    const events = await sendableEvents([id]);
    await receivedAll("/lease", events, "leased events");
    const attempts = await attemptsOf(endpoint.id);
    const first = attempts.find((a) => a.event_id === `evt_${id}_1`);
    expect(first?.attempted_at).toBeGreaterThanOrEqual(lease?.until ?? Infinity);
    const bodies = at("/lease").map((d) => verified(endpoint.secret, d));
    expect(bodies.map((b) => b.data.seq)).toEqual([...bodies.map((b) => b.data.seq)].sort((x, y) => x - y));
    expect(bodies).toHaveLength(events.size);
  });

  it("given an endpoint on a private address not allowed, then nothing is sent and the attempt says why", async () => {
    const org = await onboard(h);
    const endpoint = await createEndpoint(org.apiKey, "/private", ["message.accepted"]);
    // This worker allows no private network (WEBHOOK_ALLOWED_NETWORKS unset).
    dispatcher({
      post: outboundPost(createOutboundAgent({ allowedNetworks: [] })),
      retryDelaysMs: [60_000],
    });
    await send(org.apiKey);

    const [attempt] = await eventually(
      async () => {
        const attempts = await attemptsOf(endpoint.id);
        return attempts.length > 0 ? attempts : undefined;
      },
      10_000,
      "an attempt",
    );
    expect(attempt).toMatchObject({ status_code: null, error_class: "address_refused", gave_up: false });
    expect(attempt?.next_retry_at).not.toBeNull();
    expect(at("/private")).toHaveLength(0);
    expect(await deliveriesLeft(endpoint.id)).toBe(1);
  });
});

describe("settleDeliveries", () => {
  let unknownDeliveries = 0;
  const settlement = (
    endpointId: string,
    organizationId: string,
    at: string,
    result: DeliverySettlement["result"],
  ) =>
    ({
      deliveryId: -++unknownDeliveries, // no such delivery: only the attempt and the endpoint are written
      endpointId,
      organizationId,
      attemptId: uuidv7(),
      attemptsBefore: 0,
      leasedUntil: "2026-11-25 12:00:00+00",
      eventId: "evt_x_1",
      eventType: "message.accepted",
      attemptedAt: new Date(at),
      durationMs: 1,
      statusCode: result === "delivered" ? 200 : 500,
      errorClass: result === "delivered" ? null : "http",
      errorCode: result === "delivered" ? null : "http_500",
      result,
      ...(result === "retry" ? { retryAt: new Date(Date.parse(at) + 1000) } : {}),
    }) satisfies DeliverySettlement;

  it("given failures around a success in one batch, then the endpoint fails since the first failure after the success", async () => {
    const org = await onboard(h);
    const endpoint = await createEndpoint(org.apiKey, "/settle");
    const options = { now: new Date("2026-11-25T12:00:00.000Z"), failingDisableMs: 5 * 86_400_000 };
    const s = (at: string, result: DeliverySettlement["result"]) =>
      settlement(endpoint.id, org.id, at, result);

    await settleDeliveries(
      h.sql,
      [
        s("2026-11-25T10:00:00.000Z", "retry"),
        s("2026-11-25T10:01:00.000Z", "delivered"),
        s("2026-11-25T10:03:00.000Z", "retry"),
        s("2026-11-25T10:02:00.000Z", "retry"),
      ],
      options,
    );
    expect((await endpointRow(endpoint.id))?.failing_since).toBe(Date.parse("2026-11-25T10:02:00.000Z"));

    // A later failure keeps the time it started failing; a success clears it.
    await settleDeliveries(h.sql, [s("2026-11-25T11:00:00.000Z", "retry")], options);
    expect((await endpointRow(endpoint.id))?.failing_since).toBe(Date.parse("2026-11-25T10:02:00.000Z"));
    await settleDeliveries(h.sql, [s("2026-11-25T11:30:00.000Z", "delivered")], options);
    expect((await endpointRow(endpoint.id))?.failing_since).toBeNull();
    expect(await attemptsOf(endpoint.id)).toHaveLength(6);

    // Failing since more than 5 days before `now`: disabled, and the statement says so.
    const earlier = { ...options, now: new Date("2026-11-25T10:00:00.000Z") };
    expect(await settleDeliveries(h.sql, [s("2026-11-20T11:00:00.000Z", "retry")], earlier)).toEqual([]);
    expect(await endpointRow(endpoint.id)).toMatchObject({ enabled: true });
    const disabled = await settleDeliveries(h.sql, [s("2026-11-25T11:59:00.000Z", "retry")], options);
    expect(disabled).toEqual([{ endpointId: endpoint.id, reason: "failing" }]);
    expect(await endpointRow(endpoint.id)).toMatchObject({ enabled: false, disabled_reason: "failing" });
  });
});

/** Leases a delivery as a claim does (for `span` from now); returns the lease as the claim reads it. */
async function lease(deliveryId: number, span = "30 seconds"): Promise<string> {
  const [row] = await h.sql<Array<{ leased_until: string }>>`
    update webhook_deliveries set leased_until = now() + ${span}::interval where id = ${deliveryId}
    returning leased_until::text as leased_until`;
  return row?.leased_until ?? "";
}

/** A delivery row written directly (the settle and the purge need no event behind it). */
async function insertDelivery(endpointId: string, organizationId: string, attempts = 0): Promise<number> {
  const [row] = await h.sql<Array<{ id: string }>>`
    insert into webhook_deliveries (endpoint_id, organization_id, message_id, seq, event_type, event_at, attempts)
    values (${endpointId}, ${organizationId}, ${uuidv7()}, 1, 'message.accepted', now(), ${attempts})
    returning id`;
  return Number(row?.id);
}

describe("settling again what was settled (a lost reply)", () => {
  it("given a batch settled twice, then the second changes nothing: one attempt row, the retry counted once", async () => {
    const org = await onboard(h);
    const endpoint = await createEndpoint(org.apiKey, "/replay");
    const deliveryId = await insertDelivery(endpoint.id, org.id);
    const leasedUntil = await lease(deliveryId);
    const retryAt = new Date(Date.now() + 3_600_000);
    const batch: DeliverySettlement[] = [
      {
        deliveryId,
        endpointId: endpoint.id,
        organizationId: org.id,
        attemptId: uuidv7(),
        attemptsBefore: 0,
        leasedUntil,
        eventId: "evt_replay_1",
        eventType: "message.accepted",
        attemptedAt: new Date(),
        durationMs: 3,
        statusCode: 500,
        errorClass: "http",
        errorCode: "http_500",
        result: "retry",
        retryAt,
      },
    ];
    const options = { now: new Date(), failingDisableMs: 5 * 86_400_000 };
    await settleDeliveries(h.sql, batch, options);
    await settleDeliveries(h.sql, batch, options);

    const [row] = await h.sql<Array<{ attempts: number; leased: boolean }>>`
      select attempts, leased_until is not null as leased from webhook_deliveries where id = ${deliveryId}`;
    expect(row).toEqual({ attempts: 1, leased: false });
    expect(await attemptsOf(endpoint.id)).toHaveLength(1);
  });

  it("given a retry settled after its lease ran out and another worker claimed the row, then that worker's lease is kept", async () => {
    const org = await onboard(h);
    const endpoint = await createEndpoint(org.apiKey, "/fenced");
    const deliveryId = await insertDelivery(endpoint.id, org.id);
    const first = await lease(deliveryId);
    // The first worker's lease ran out; a second worker claimed the row: a lease of its own.
    const second = await lease(deliveryId, "1 minute");
    expect(second).not.toBe(first);
    const late: DeliverySettlement = {
      deliveryId,
      endpointId: endpoint.id,
      organizationId: org.id,
      attemptId: uuidv7(),
      attemptsBefore: 0,
      leasedUntil: first,
      eventId: "evt_fenced_1",
      eventType: "message.accepted",
      attemptedAt: new Date(),
      durationMs: 10_000,
      statusCode: null,
      errorClass: "timeout",
      errorCode: "ETIMEDOUT",
      result: "retry",
      retryAt: new Date(Date.now() - 1000),
    };
    await settleDeliveries(h.sql, [late], { now: new Date(), failingDisableMs: 5 * 86_400_000 });
    const [row] = await h.sql<Array<{ attempts: number; leased_until: string }>>`
      select attempts, leased_until::text as leased_until from webhook_deliveries where id = ${deliveryId}`;
    // Not rescheduled (no attempt counted, the second worker's lease intact): not claimable meanwhile.
    expect(row).toEqual({ attempts: 0, leased_until: second });
    // The late attempt is still on the record.
    expect(await attemptsOf(endpoint.id)).toHaveLength(1);
  });

  it("given a settle that keeps failing (not an outage), then the rest is settled, the failing one dropped and its slots freed", async () => {
    const [a, b] = await Promise.all([onboard(h), onboard(h)]);
    const poisoned = await createEndpoint(a.apiKey, "/poisoned", ["message.accepted"]);
    const healthy = await createEndpoint(b.apiKey, "/healthy", ["message.accepted"]);
    // A real error from Postgres for this endpoint's attempt rows: every batch holding one fails.
    await h.sql.unsafe(`
      create or replace function test_poison() returns trigger language plpgsql as $$
      begin
        if new.endpoint_id = '${poisoned.id}' then raise exception 'poisoned attempt'; end if;
        return new;
      end $$;
      create trigger test_poison before insert on webhook_attempts for each row execute function test_poison();`);
    try {
      const d = dispatcher({ leaseMs: 120_000 });
      await send(a.apiKey);
      await eventually(async () => (at("/poisoned").length > 0 ? true : undefined), 10_000, "poisoned POST");
      // Sent after the poisoned attempt: settled only if that one no longer blocks the queue.
      const later = await Promise.all([send(b.apiKey), send(b.apiKey)]);
      await receivedAll("/healthy", new Set(later.map((id) => `evt_${id}_1`)), "healthy events");
      await eventually(
        async () => ((await deliveriesLeft(healthy.id)) === 0 ? true : undefined),
        15_000,
        "healthy settled",
      );
      await eventually(async () => (d.inFlight === 0 ? true : undefined), 15_000, "slots freed");
      // Not recorded: it waits for its lease (at least once).
      expect(await deliveriesLeft(poisoned.id)).toBe(1);
      expect(await attemptsOf(poisoned.id)).toHaveLength(0);
    } finally {
      await h.sql`drop trigger test_poison on webhook_attempts`;
    }
  });
});

describe("an attempt that throws", () => {
  it("is recorded as a failed attempt and follows the schedule, not retried every lease with its message's later events held back", async () => {
    const org = await onboard(h);
    const endpoint = await createEndpoint(org.apiKey, "/throws", ["message.accepted"]);
    // A fault in the dispatcher after the POST (here the metrics): nothing is known of the attempt.
    const metrics = {
      webhookAttempt(outcome: string) {
        if (outcome !== "not_sendable") throw new Error("metrics broke");
      },
      webhookDelivered() {},
    };
    dispatcher({ metrics, retryDelaysMs: [20, 20], leaseMs: 120_000 });
    await send(org.apiKey);

    await eventually(
      async () => ((await deliveriesLeft(endpoint.id)) === 0 ? true : undefined),
      10_000,
      "given up",
    );
    const attempts = await attemptsOf(endpoint.id);
    expect(attempts.map((a) => [a.error_class, a.gave_up])).toEqual([
      ["not_sendable", false],
      ["not_sendable", false],
      ["not_sendable", true],
    ]);
  });
});

describe("claimDueDeliveries", () => {
  it("given the first due endpoint's only due row held back by its message's order, then a claim of 1 takes the next endpoint's", async () => {
    const org = await onboard(h);
    const first = await createEndpoint(org.apiKey, "/order/first");
    const second = await createEndpoint(org.apiKey, "/order/second", ["message.accepted"]);
    const id = await send(org.apiKey);
    await final([id]);
    const seqs = await h.sql<Array<{ seq: number }>>`
      select seq from webhook_deliveries where endpoint_id = ${first.id} order by seq`;
    expect(seqs.length).toBeGreaterThanOrEqual(2);
    // The first endpoint: its accepted event in flight elsewhere (leased, untried), the later ones
    // due for an hour (the longest waiting); the second endpoint's accepted event due for a minute.
    await h.sql`update webhook_deliveries set leased_until = now() + interval '1 hour'
      where endpoint_id = ${first.id} and seq = ${seqs[0]?.seq ?? 0}`;
    await h.sql`update webhook_deliveries set next_attempt_at = now() - interval '1 hour'
      where endpoint_id = ${first.id} and seq > ${seqs[0]?.seq ?? 0}`;
    await h.sql`update webhook_deliveries set next_attempt_at = now() - interval '1 minute'
      where endpoint_id = ${second.id}`;

    const { deliveries: claimed } = await claimDueDeliveries(h.sql, {
      limit: 1,
      perEndpoint: 4,
      inFlight: new Map(),
      leaseMs: 60_000,
    });
    expect(claimed.map((c) => [c.endpointId, c.messageId, c.seq])).toEqual([[second.id, id, 1]]);
  });

  it("given three endpoints with two due events each, then claims of one from where the last stopped serve each endpoint once before any twice", async () => {
    const org = await onboard(h);
    const endpoints = await Promise.all(
      ["/round/a", "/round/b", "/round/c"].map((path) =>
        createEndpoint(org.apiKey, path, ["message.accepted"]),
      ),
    );
    const ids = [await send(org.apiKey), await send(org.apiKey)];
    await final(ids);
    const ours = new Set(endpoints.map((e) => e.id));
    const served: string[] = [];
    let cursor: string | null = null;
    for (let i = 0; i < 20 && served.length < 6; i++) {
      const claim = await claimDueDeliveries(h.sql, {
        limit: 1,
        perEndpoint: 1,
        inFlight: new Map(),
        leaseMs: 600_000,
        after: cursor,
      });
      cursor = claim.cursor;
      for (const c of claim.deliveries) if (ours.has(c.endpointId)) served.push(c.endpointId);
    }
    const inIdOrder = [...ours].sort();
    const start = inIdOrder.indexOf(served[0] ?? "");
    const round = [...inIdOrder.slice(start), ...inIdOrder.slice(0, start)];
    expect(served).toEqual([...round, ...round]);
  });
});

describe("deleting an endpoint", () => {
  it("given an endpoint's DELETE not yet committed, then an event write for it and another organization's succeeds without waiting, and the purge deletes what the endpoint left", async () => {
    const [a, b] = await Promise.all([onboard(h), onboard(h)]);
    const theirs = await createEndpoint(a.apiKey, "/deleted", ["message.retry_scheduled"]);
    const ours = await createEndpoint(b.apiKey, "/kept", ["message.retry_scheduled"]);
    const [ma, mb] = [await send(a.apiKey), await send(b.apiKey)];
    await final([ma, mb]);
    await h.sql`insert into webhook_attempts (id, endpoint_id, organization_id, event_id, event_type,
      attempted_at, status_code, duration_ms)
      values (${uuidv7()}, ${theirs.id}, ${a.id}, 'evt_x_1', 'message.accepted', now(), 200, 1)`;

    let deleted!: () => void;
    const deleting = new Promise<void>((resolve) => {
      deleted = resolve;
    });
    let commit!: () => void;
    const committing = new Promise<void>((resolve) => {
      commit = resolve;
    });
    const deletion = h.sql.begin(async (tx) => {
      await tx`delete from webhook_endpoints where id = ${theirs.id}`;
      deleted();
      await committing;
    });
    try {
      await deleting;
      // One statement with both organizations' events (as an accept batch writes them), on
      // another connection, while the DELETE holds its lock: it must not wait for it.
      await h.sql.begin(async (tx) => {
        await tx`set local lock_timeout = '5s'`;
        await tx`
          insert into message_events (message_id, seq, type, retry_count, data, occurred_at, organization_id)
          select m.message_id, (select max(seq) + 1 from message_events e where e.message_id = m.message_id),
            'pending', 1, '{"kind":"retry_scheduled"}'::jsonb, now(), m.organization_id
          from messages m where m.message_id in (${ma}, ${mb})`;
      });
    } finally {
      commit();
      await deletion;
    }
    expect(await deliveriesLeft(ours.id)).toBe(1);

    const purged = await purgeWebhookRows(h.sql, { now: new Date(), attemptRetentionMs: 30 * 86_400_000 });
    expect(purged.deliveries).toBeGreaterThanOrEqual(1);
    expect(purged.attempts).toBeGreaterThanOrEqual(1);
    expect(await deliveriesLeft(theirs.id)).toBe(0);
    expect(await attemptsOf(theirs.id)).toHaveLength(0);
    expect(await deliveriesLeft(ours.id)).toBe(1);
  });
});

describe("the purge", () => {
  it("deletes disabled endpoints' deliveries and attempts older than the retention, a chunk at a time, and keeps the rest", async () => {
    const org = await onboard(h);
    const on = await createEndpoint(org.apiKey, "/purge/on");
    const off = await createEndpoint(org.apiKey, "/purge/off");
    await h.sql`update webhook_endpoints set enabled = false where id = ${off.id}`;
    for (let i = 0; i < 3; i++) await insertDelivery(off.id, org.id);
    const kept = await insertDelivery(on.id, org.id);
    const now = Date.now();
    const attempt = (ageDays: number) => {
      const attemptedAt = new Date(now - ageDays * 86_400_000);
      return h.sql`insert into webhook_attempts (id, endpoint_id, organization_id, event_id, event_type,
        attempted_at, status_code, duration_ms)
        values (${uuidv7({ msecs: attemptedAt.getTime() })}, ${on.id}, ${org.id}, 'evt_x_1', 'message.accepted',
          ${attemptedAt.toISOString()}, 200, 1)`;
    };
    for (const age of [31, 40, 45, 29, 1]) await attempt(age);

    const purged = await purgeWebhookRows(h.sql, {
      now: new Date(now),
      attemptRetentionMs: 30 * 86_400_000,
      batchSize: 2,
    });
    expect(purged.deliveries).toBeGreaterThanOrEqual(3);
    expect(purged.expiredAttempts).toBeGreaterThanOrEqual(3);
    expect(await deliveriesLeft(off.id)).toBe(0);
    const [left] = await h.sql<
      Array<{ id: string }>
    >`select id from webhook_deliveries where endpoint_id = ${on.id}`;
    expect(Number(left?.id)).toBe(kept);
    const ages = (await attemptsOf(on.id)).map((a) => Math.round((now - a.attempted_at) / 86_400_000));
    expect(ages).toEqual([29, 1]);
  });
});

describe("changing an endpoint", () => {
  it("given an endpoint disabled as failing, when it is re-enabled or its URL changes, then its failing time is cleared; when its organization disables it, its waiting deliveries are dropped", async () => {
    const org = await onboard(h);
    const endpoint = await createEndpoint(org.apiKey, "/patch");
    const path = `/api/v1/webhooks/endpoints/${endpoint.id}`;
    await h.sql`update webhook_endpoints set enabled = false, disabled_reason = 'failing',
      failing_since = now() - interval '6 days' where id = ${endpoint.id}`;
    expect((await call(org.apiKey, "PATCH", path, { enabled: true })).status).toBe(200);
    expect(await endpointRow(endpoint.id)).toMatchObject({
      enabled: true,
      disabled_reason: null,
      failing_since: null,
    });

    await h.sql`update webhook_endpoints set failing_since = now() - interval '4 days' where id = ${endpoint.id}`;
    expect((await call(org.apiKey, "PATCH", path, { url: `${base}/patch/moved` })).status).toBe(200);
    expect((await endpointRow(endpoint.id))?.failing_since).toBeNull();

    await h.sql`update webhook_endpoints set failing_since = now() - interval '4 days' where id = ${endpoint.id}`;
    expect((await call(org.apiKey, "PATCH", path, { description: "kept failing" })).status).toBe(200);
    expect((await endpointRow(endpoint.id))?.failing_since).not.toBeNull();

    await insertDelivery(endpoint.id, org.id);
    await insertDelivery(endpoint.id, org.id, 2);
    expect((await call(org.apiKey, "PATCH", path, { enabled: false })).status).toBe(200);
    expect(await deliveriesLeft(endpoint.id)).toBe(0);
  });
});
