import { randomUUID } from "node:crypto";
import { sql } from "drizzle-orm";
import { v7 as uuidv7 } from "uuid";
import { afterAll, describe, expect, it } from "vitest";
import type { MessageEvent } from "../../../src/domain/events.js";
import { initialState } from "../../../src/domain/state.js";
import { webhookEventId } from "../../../src/domain/webhooks.js";
import { recoverWebhookEvents } from "../../../src/messages/webhooks.js";
import { appendEvents } from "../../../src/store/events.js";
import { findWebhookEndpoint, insertWebhookAttempt } from "../../../src/store/webhooks.js";
import { purgeWebhookRows } from "../../../workers/webhook-purger.js";
import { acceptedSmsEvent } from "../../support/accepted-event.js";
import { createHarness, expectError, onboard } from "../../support/harness.js";
import { fetchDocument, responseChecker } from "../../support/openapi.js";

/**
 * Status webhooks around the dispatcher: `POST …/{id}/recover` queues past events again (read
 * back from `webhook_deliveries`, which the dispatcher sends), the attempts list shows what was
 * given up, and erasing an organization's data deletes its endpoints. Messages are written
 * through the event store with the times a test needs, as the accept path and the worker write them.
 */

const h = createHarness();
afterAll(() => h.close());

const MINUTE = 60_000;
const HOUR = 60 * MINUTE;

type Org = Awaited<ReturnType<typeof onboard>>;

function call(apiKey: string, method: string, path: string, body?: unknown) {
  return Promise.resolve(
    h.app.request(path, {
      method,
      headers: { "x-api-key": apiKey, ...(body === undefined ? {} : { "content-type": "application/json" }) },
      body: body === undefined ? undefined : JSON.stringify(body),
    }),
  );
}

async function createEndpoint(org: Org, body: Record<string, unknown> = {}): Promise<string> {
  const response = await call(org.apiKey, "POST", "/api/v1/webhooks/endpoints", {
    url: `https://hooks.example.com/${randomUUID()}`,
    ...body,
  });
  expect(response.status, await response.clone().text()).toBe(201);
  return ((await response.json()) as { id: string }).id;
}

function recover(org: Org, endpointId: string, body: unknown) {
  return call(org.apiKey, "POST", `/api/v1/webhooks/endpoints/${endpointId}/recover`, body);
}

type Step = "started" | "retry_scheduled" | "success" | "failed";

/**
 * Writes a message accepted at `at`, then each step at its offset from `at` (ms), through the
 * event store (its record and, for endpoints enabled by then, its deliveries come with it).
 */
async function writeMessage(org: Org, at: Date, steps: Array<[number, Step]>): Promise<string> {
  // A UUIDv7 of its accept, as the API makes them: recover reads the day partitions from its
  // lookback on (docs/decisions/0042).
  const id = uuidv7({ msecs: at.getTime() });
  const time = (offset: number) => new Date(at.getTime() + offset).toISOString();
  let attempt = 0;
  const events: MessageEvent[] = [acceptedSmsEvent(id, org, time(0), time(24 * HOUR))];
  for (const [offset, step] of steps) {
    const occurredAt = time(offset);
    const retryCount = Math.max(0, attempt - 1);
    if (step === "started") {
      attempt += 1;
      events.push({ type: "pending", retryCount, occurredAt, data: { kind: "attempt_started", attempt } });
    } else if (step === "retry_scheduled") {
      events.push({
        type: "pending",
        retryCount: attempt,
        occurredAt,
        data: {
          kind: "retry_scheduled",
          attempt,
          error: { class: "transient", code: "http_503", message: "unavailable" },
          retryAt: time(offset + MINUTE),
        },
      });
    } else if (step === "success") {
      events.push({
        type: "success",
        retryCount,
        occurredAt,
        data: { attempt, provider: "simulator", providerMessageId: `sim-${id}` },
      });
    } else {
      events.push({ type: "failed", retryCount, occurredAt, data: { reason: "ttl_expired", attempt } });
    }
  }
  await appendEvents(h.sql, initialState, events);
  return id;
}

type Delivery = {
  id: number;
  message_id: string;
  seq: number;
  event_type: string;
  event_at: string;
};

async function deliveriesOf(endpointId: string): Promise<Delivery[]> {
  const rows = await h.db.execute<Delivery>(sql`
    select id::int as id, message_id, seq, event_type, event_at
    from webhook_deliveries where endpoint_id = ${endpointId} order by id`);
  return rows.map((row) => ({ ...row, event_at: new Date(row.event_at).toISOString() }));
}

/** The events of `messageIds` an endpoint subscribed to `types` (null: all) gets since `since`, in event order. */
async function expectedEvents(messageIds: string[], since: Date, types: string[] | null) {
  const rows = await h.db.execute<{
    message_id: string;
    seq: number;
    event_type: string;
    occurred_at: string;
  }>(sql`
    select message_id, seq, webhook_event_type(type, data) as event_type, occurred_at
    from message_events
    where message_id in (${sql.join(
      messageIds.map((id) => sql`${id}::uuid`),
      sql`, `,
    )})
      and occurred_at >= ${since.toISOString()}::timestamptz
      and webhook_event_type(type, data) is not null
    order by occurred_at, message_id, seq`);
  return rows
    .filter((row) => types === null || types.includes(row.event_type))
    .map((row) => ({
      message_id: row.message_id,
      seq: row.seq,
      event_type: row.event_type,
      event_at: new Date(row.occurred_at).toISOString(),
    }));
}

const withoutId = ({ id, ...rest }: Delivery) => rest;

describe("recovering a webhook endpoint's events", () => {
  it("queues every subscribed event of the organization since `since`, in order, and none of another organization's", async () => {
    const org = await onboard(h);
    const neighbour = await onboard(h);
    const now = new Date();
    const since = new Date(now.getTime() - 3 * HOUR);
    const before = await writeMessage(org, new Date(now.getTime() - 30 * HOUR), [
      [1000, "started"],
      [2000, "success"],
    ]);
    // Accepted more than a time-to-live before `since`, its final event recorded late (workers
    // were down when its time ran out): recovered, as the look-back allows a day for this.
    const late = await writeMessage(org, new Date(now.getTime() - 28 * HOUR), [
      [1000, "started"],
      [26 * HOUR, "failed"],
    ]);
    const straddling = await writeMessage(org, new Date(now.getTime() - 150 * MINUTE), [
      [1000, "started"],
      [2000, "success"],
    ]);
    const retried = await writeMessage(org, new Date(now.getTime() - HOUR), [
      [1000, "started"],
      [2000, "retry_scheduled"],
      [MINUTE + 1000, "started"],
      [MINUTE + 2000, "success"],
    ]);
    await writeMessage(neighbour, new Date(now.getTime() - HOUR), [
      [1000, "started"],
      [2000, "success"],
    ]);
    const all = await createEndpoint(org);
    const succeededOnly = await createEndpoint(org, { events: ["message.succeeded"] });
    expect(await deliveriesOf(all)).toEqual([]);

    // An offset other than Z names the same instant.
    const sinceInParis = new Date(since.getTime() + HOUR).toISOString().replace("Z", "+01:00");
    const answer = await recover(org, all, { since: sinceInParis });
    expect(answer.status, await answer.clone().text()).toBe(202);
    const mine = [before, late, straddling, retried];
    const expected = await expectedEvents(mine, since, null);
    expect(expected.map((e) => e.event_type)).toEqual([
      "message.accepted",
      "message.succeeded",
      "message.failed",
      "message.accepted",
      "message.retry_scheduled",
      "message.succeeded",
    ]);
    expect(await answer.json()).toEqual({ recovered: expected.length, truncated: false, next_since: null });
    const queued = await deliveriesOf(all);
    // Ids in event order: the dispatcher sends them in that order.
    expect(queued.map(withoutId)).toEqual(expected);
    const [row] = await h.db.execute<{ organization_id: string; attempts: number; due: boolean }>(sql`
      select organization_id, attempts, next_attempt_at <= now() as due
      from webhook_deliveries where endpoint_id = ${all} limit 1`);
    expect(row).toEqual({ organization_id: org.id, attempts: 0, due: true });

    const subscribed = await recover(org, succeededOnly, { since: since.toISOString() });
    expect(subscribed.status).toBe(202);
    expect((await deliveriesOf(succeededOnly)).map(withoutId)).toEqual(
      await expectedEvents(mine, since, ["message.succeeded"]),
    );
  });

  it("does not double an event still waiting to be sent, and queues again one already sent", async () => {
    const org = await onboard(h);
    const endpoint = await createEndpoint(org);
    const start = new Date(Date.now() - 10 * MINUTE);
    // Written while the endpoint exists: the fan-out queued its events already.
    const id = await writeMessage(org, start, [
      [1000, "started"],
      [2000, "success"],
    ]);
    const fannedOut = await deliveriesOf(endpoint);
    expect(fannedOut.map((d) => [d.message_id, d.seq])).toEqual([
      [id, 1],
      [id, 3],
    ]);
    const stored = await findWebhookEndpoint(h.db, org.id, endpoint);
    if (!stored) throw new Error("endpoint not stored");

    expect(await recoverWebhookEvents(h.deps, stored, start)).toEqual({
      outcome: "recovered",
      recovered: 2,
      queued: 0,
      nextSince: null,
    });
    expect(await deliveriesOf(endpoint)).toEqual(fannedOut);

    // The dispatcher sent the first (its row is gone): recovering queues it again, after the other.
    await h.db.execute(sql`delete from webhook_deliveries where id = ${fannedOut[0]?.id}`);
    expect(await recoverWebhookEvents(h.deps, stored, start)).toMatchObject({ recovered: 2, queued: 1 });
    const after = await deliveriesOf(endpoint);
    expect(after.map((d) => [d.message_id, d.seq])).toEqual([
      [id, 3],
      [id, 1],
    ]);
    expect(after[0]).toEqual(fannedOut[1]);
  });

  it("brings forward an event waiting on a retry, and not one a worker holds (leased)", async () => {
    const org = await onboard(h);
    const endpoint = await createEndpoint(org);
    const start = new Date(Date.now() - 10 * MINUTE);
    const id = await writeMessage(org, start, [
      [1000, "started"],
      [2000, "success"],
    ]);
    const [waiting, held] = await deliveriesOf(endpoint);
    // The first failed once and waits 5 h for its retry; the second is in flight for its second attempt.
    await h.db.execute(sql`update webhook_deliveries set attempts = 1, next_attempt_at = now() + interval '5 hours'
      where id = ${waiting?.id}`);
    await h.db.execute(sql`update webhook_deliveries set attempts = 1,
      leased_until = now() + interval '30 seconds' where id = ${held?.id}`);
    const leaseOf = async () =>
      (
        await h.db.execute<{ leased_until: string }>(
          sql`select leased_until::text as leased_until from webhook_deliveries where id = ${held?.id}`,
        )
      )[0]?.leased_until;
    const heldLease = await leaseOf();
    const stored = await findWebhookEndpoint(h.db, org.id, endpoint);
    if (!stored) throw new Error("endpoint not stored");

    expect(await recoverWebhookEvents(h.deps, stored, start)).toEqual({
      outcome: "recovered",
      recovered: 2,
      queued: 0,
      nextSince: null,
    });
    const rows = await h.db.execute<{ seq: number; attempts: number; due: boolean; leased: boolean }>(sql`
      select seq, attempts, next_attempt_at <= now() and leased_until is null as due,
        coalesce(leased_until > now(), false) as leased
      from webhook_deliveries where endpoint_id = ${endpoint} order by seq`);
    expect(rows.map((r) => ({ ...r }))).toEqual([
      { seq: 1, attempts: 1, due: true, leased: false },
      { seq: 3, attempts: 1, due: false, leased: true },
    ]);
    // The worker's lease is left as it was.
    expect(await leaseOf()).toBe(heldLease);
    expect(waiting?.message_id).toBe(id);
  });

  it("stops after the limit and says where to go on from; going on from there queues the rest, in order", async () => {
    const org = await onboard(h);
    const endpoint = await createEndpoint(org, { enabled: false });
    const start = new Date(Date.now() - 2 * HOUR);
    const ids = [];
    for (let i = 0; i < 3; i++) {
      ids.push(
        await writeMessage(org, new Date(start.getTime() + i * MINUTE), [
          [1000, "started"],
          [2000, "success"],
        ]),
      );
    }
    await h.db.execute(sql`update webhook_endpoints set enabled = true where id = ${endpoint}`);
    const stored = await findWebhookEndpoint(h.db, org.id, endpoint);
    if (!stored) throw new Error("endpoint not stored");
    const expected = await expectedEvents(ids, start, null);
    expect(expected).toHaveLength(6);

    const calls = [];
    let since: Date | null = start;
    while (since) {
      const result = await recoverWebhookEvents(h.deps, stored, since, 4);
      if (result.outcome !== "recovered") throw new Error(result.outcome);
      calls.push(result);
      since = result.nextSince;
    }
    expect(calls.map((c) => c.recovered)).toEqual([4, 2]);
    expect(calls[0]?.nextSince?.toISOString()).toBe(expected[4]?.event_at);
    expect((await deliveriesOf(endpoint)).map(withoutId)).toEqual(expected);
  });

  it("refuses a disabled endpoint with 409 and queues nothing for it", async () => {
    const org = await onboard(h);
    const endpoint = await createEndpoint(org, { enabled: false });
    const since = new Date(Date.now() - HOUR);
    await writeMessage(org, new Date(since.getTime() + MINUTE), [[1000, "started"]]);
    await expectError(await recover(org, endpoint, { since: since.toISOString() }), 409, /enable it/);
    expect(await deliveriesOf(endpoint)).toEqual([]);
  });

  it("refuses a bad `since` with 400, and one in the future or more than 7 days ago with 422", async () => {
    // Each call takes one of the organization's 2 recoveries at once: one organization per call.
    const cases: Array<[unknown, number, RegExp]> = [
      [{}, 400, /since/],
      [{ since: "2026-11-24T08:00:00" }, 400, /since/],
      [{ since: "yesterday" }, 400, /since/],
      [{ since: new Date().toISOString(), colour: "red" }, 400, /colour/],
      [{ since: new Date(Date.now() + 10 * MINUTE).toISOString() }, 422, /future/],
      [{ since: new Date(Date.now() - 8 * 24 * HOUR).toISOString() }, 422, /7 days/],
    ];
    for (const [body, status, pattern] of cases) {
      const org = await onboard(h);
      const endpoint = await createEndpoint(org);
      await expectError(await recover(org, endpoint, body), status, pattern);
    }
    const org = await onboard(h);
    const endpoint = await createEndpoint(org);
    const noType = await h.app.request(`/api/v1/webhooks/endpoints/${endpoint}/recover`, {
      method: "POST",
      headers: { "x-api-key": org.apiKey },
      body: JSON.stringify({ since: new Date().toISOString() }),
    });
    await expectError(noType, 415);
  });

  it("answers another organization's endpoint with the 404 of an unknown one, and queues nothing", async () => {
    const owner = await onboard(h);
    const other = await onboard(h);
    const since = new Date(Date.now() - HOUR);
    await writeMessage(owner, new Date(since.getTime() + MINUTE), [[1000, "started"]]);
    const endpoint = await createEndpoint(owner);
    const theirs = await recover(other, endpoint, { since: since.toISOString() });
    const unknown = await recover(other, randomUUID(), { since: since.toISOString() });
    expect(theirs.status).toBe(404);
    expect(await theirs.json()).toEqual(await unknown.json());
    expect(await deliveriesOf(endpoint)).toEqual([]);
  });

  it("allows 2 recoveries at once per organization, then 429 with Retry-After; another organization is not held", async () => {
    const org = await onboard(h);
    const endpoint = await createEndpoint(org);
    const body = { since: new Date(Date.now() - HOUR).toISOString() };
    const answers = await Promise.all(Array.from({ length: 3 }, () => recover(org, endpoint, body)));
    expect(answers.map((answer) => answer.status).sort()).toEqual([202, 202, 429]);
    const passed = answers.find((answer) => answer.status === 202);
    expect(passed?.headers.get("ratelimit-policy")).toBe("2;w=20");
    const refused = answers.find((answer) => answer.status === 429);
    if (!refused) throw new Error("none refused");
    expect(Number(refused.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);
    await expectError(refused, 429, /recover webhook events/);
    const other = await onboard(h);
    expect((await recover(other, await createEndpoint(other), body)).status).toBe(202);
  });

  it("is documented: its answers match the OpenAPI document", async () => {
    const expectDocumented = responseChecker(await fetchDocument(h.app));
    const path = "/api/v1/webhooks/endpoints/{id}/recover";
    const org = await onboard(h);
    const endpoint = await createEndpoint(org);
    await expectDocumented(await recover(org, endpoint, { since: new Date().toISOString() }), "post", path);
    await expectDocumented(await recover(org, endpoint, { since: "soon" }), "post", path);
    const disabled = await onboard(h);
    const off = await createEndpoint(disabled, { enabled: false });
    await expectDocumented(await recover(disabled, off, { since: new Date().toISOString() }), "post", path);
  });
});

describe("the attempts of an endpoint", () => {
  it("show when a failed event is tried again, and that one was given up", async () => {
    const org = await onboard(h);
    const endpoint = await createEndpoint(org);
    const eventId = webhookEventId(randomUUID(), 3);
    const at = new Date();
    const attempt = {
      endpointId: endpoint,
      organizationId: org.id,
      eventId,
      eventType: "message.succeeded",
      statusCode: 503,
      durationMs: 12,
      errorClass: "http",
      errorCode: "http_503",
    };
    await insertWebhookAttempt(h.db, {
      ...attempt,
      id: h.deps.newId(),
      attemptedAt: at,
      nextRetryAt: new Date(at.getTime() + 5000),
      gaveUp: false,
    });
    await insertWebhookAttempt(h.db, {
      ...attempt,
      id: h.deps.newId(),
      attemptedAt: new Date(at.getTime() + 5000),
      nextRetryAt: null,
      gaveUp: true,
    });
    const response = await call(org.apiKey, "GET", `/api/v1/webhooks/endpoints/${endpoint}/attempts`);
    await responseChecker(await fetchDocument(h.app))(
      response.clone(),
      "get",
      "/api/v1/webhooks/endpoints/{id}/attempts",
    );
    const { attempts } = (await response.json()) as { attempts: Array<Record<string, unknown>> };
    expect(attempts).toEqual([
      expect.objectContaining({ event_id: eventId, succeeded: false, next_retry_at: null, gave_up: true }),
      expect.objectContaining({
        event_id: eventId,
        succeeded: false,
        next_retry_at: new Date(at.getTime() + 5000).toISOString(),
        gave_up: false,
      }),
    ]);
  });
});

describe("erasing an organization's data", () => {
  it("deletes its webhook endpoints (their deliveries and attempts at the next purge), and leaves another organization's", async () => {
    const victim = await onboard(h);
    const neighbour = await onboard(h);
    const endpoints = { victim: await createEndpoint(victim), neighbour: await createEndpoint(neighbour) };
    for (const [org, endpoint] of [
      [victim, endpoints.victim],
      [neighbour, endpoints.neighbour],
    ] as const) {
      await writeMessage(org, new Date(Date.now() - MINUTE), [[1000, "started"]]);
      await insertWebhookAttempt(h.db, {
        id: h.deps.newId(),
        endpointId: endpoint,
        organizationId: org.id,
        eventId: webhookEventId(randomUUID(), 1),
        eventType: "message.accepted",
        attemptedAt: new Date(),
        statusCode: 200,
        durationMs: 3,
        errorClass: null,
        errorCode: null,
        nextRetryAt: null,
        gaveUp: false,
      });
    }
    const counts = async (organizationId: string) => {
      const [row] = await h.db.execute<{ endpoints: number; deliveries: number; attempts: number }>(sql`
        select (select count(*) from webhook_endpoints where organization_id = ${organizationId})::int as endpoints,
               (select count(*) from webhook_deliveries where organization_id = ${organizationId})::int as deliveries,
               (select count(*) from webhook_attempts where organization_id = ${organizationId})::int as attempts`);
      return row;
    };
    expect(await counts(victim.id)).toEqual({ endpoints: 1, deliveries: 1, attempts: 1 });

    const erased = await h.app.request(`/api/v1/organizations/${victim.id}/data`, { method: "DELETE" });
    expect(erased.status).toBe(200);

    // The endpoints' rows only, at once (no cascade holding every event write up); what they
    // left is never sent, and the worker's purge deletes it.
    expect(await counts(victim.id)).toMatchObject({ endpoints: 0 });
    await purgeWebhookRows(h.sql, { now: new Date(), attemptRetentionMs: 30 * 86_400_000 });
    expect(await counts(victim.id)).toEqual({ endpoints: 0, deliveries: 0, attempts: 0 });
    await expectError(
      await call(victim.apiKey, "GET", `/api/v1/webhooks/endpoints/${endpoints.victim}`),
      404,
    );
    expect(await counts(neighbour.id)).toEqual({ endpoints: 1, deliveries: 1, attempts: 1 });
    // The organization goes on: it may register endpoints again.
    await createEndpoint(victim);
  });
});
