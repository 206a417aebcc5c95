import { inArray, sql } from "drizzle-orm";
import { v7 as uuidv7 } from "uuid";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { messageEvents, messages } from "../../../db/schema.js";
import { createApp } from "../../../src/api/app.js";
import { createHarness, getMessage, onboard, sendSms } from "../../support/harness.js";

/**
 * The accept path groups concurrent requests into one statement (src/store/accept-batcher.ts).
 * These tests drive it through the API with many requests at once, as a busy server sees them.
 */
const h = createHarness();
let apiKey = "";
beforeAll(async () => {
  apiKey = (await onboard(h)).apiKey;
});
afterAll(() => h.close());

const sms = (body = "hello") => ({ payload: { to: "+14155550100", body, sender: "ACME" } });

async function send(count: number, body: (index: number) => unknown, headers: Record<string, string> = {}) {
  const responses = await Promise.all(
    Array.from({ length: count }, (_, i) => sendSms(h, apiKey, body(i), headers)),
  );
  return Promise.all(
    responses.map(async (response) => ({
      status: response.status,
      replayed: response.headers.get("idempotent-replayed") === "true",
      body: (await response.json()) as { request_id?: string; error?: string },
    })),
  );
}

async function messageCount(ids: string[]): Promise<number> {
  const [row] = await h.db
    .select({ n: sql<number>`count(*)::int` })
    .from(messages)
    .where(inArray(messages.messageId, ids));
  return row?.n ?? 0;
}

describe("accepting concurrent requests in batches", () => {
  it("given 50 requests at once, then each gets its own id, committed, and they share a few transactions", async () => {
    const results = await send(50, (i) => sms(`batched ${i}`));

    expect(results.map((r) => r.status)).toEqual(Array(50).fill(202));
    const ids = results.map((r) => r.body.request_id ?? "");
    expect(new Set(ids).size).toBe(50);
    expect(await messageCount(ids)).toBe(50);
    const events = await h.db
      .select({ messageId: messageEvents.messageId, transactionId: messageEvents.transactionId })
      .from(messageEvents)
      .where(inArray(messageEvents.messageId, ids));
    expect(events).toHaveLength(50);
    // One commit per batch, not per request.
    expect(new Set(events.map((e) => e.transactionId)).size).toBeLessThan(50);
  });

  it("given a batch with one request Postgres refuses, then only that one fails and the others are committed", async () => {
    // One request gets the id of a message that already exists: its rows violate the unique keys.
    const [first] = await send(1, () => sms("already here"));
    const taken = first?.body.request_id ?? "";
    let calls = 0;
    const app = createApp({ ...h.deps, newId: () => (++calls === 8 ? taken : uuidv7()) });
    const responses = await Promise.all(
      Array.from({ length: 20 }, (_, i) => sendSms({ ...h, app }, apiKey, sms(`fine ${i}`))),
    );

    const statuses = responses.map((r) => r.status);
    expect(statuses.filter((s) => s === 500)).toHaveLength(1);
    expect(statuses.filter((s) => s === 202)).toHaveLength(19);
    const ids = await Promise.all(
      responses
        .filter((r) => r.status === 202)
        .map(async (r) => ((await r.json()) as { request_id: string }).request_id),
    );
    expect(ids).not.toContain(taken);
    expect(await messageCount(ids)).toBe(19);
    for (const id of ids.slice(0, 3)) expect((await getMessage(h, apiKey, id)).status).toBe(200);
    // The message whose id was reused is untouched: still one event.
    const events = await h.db
      .select()
      .from(messageEvents)
      .where(inArray(messageEvents.messageId, [taken]));
    expect(events).toHaveLength(1);
  });

  it("given 20 identical requests with one Idempotency-Key at once, then one message is created and 19 replay it", async () => {
    const results = await send(20, () => sms("same"), { "idempotency-key": `batch-race-${Date.now()}` });

    expect(results.map((r) => r.status)).toEqual(Array(20).fill(202));
    const ids = new Set(results.map((r) => r.body.request_id));
    expect(ids.size).toBe(1);
    expect(results.filter((r) => r.replayed)).toHaveLength(19);
    expect(await messageCount([...ids].map(String))).toBe(1);
  });

  it("given one Idempotency-Key with two different bodies at once, then the first body wins and the other gets 422", async () => {
    const results = await send(20, (i) => sms(i % 2 === 0 ? "body A" : "body B"), {
      "idempotency-key": `batch-conflict-${Date.now()}`,
    });

    const accepted = results.filter((r) => r.status === 202);
    const conflicts = results.filter((r) => r.status === 422);
    // Everyone who sent the winning body got the same message; everyone else a conflict.
    expect(accepted).toHaveLength(10);
    expect(conflicts).toHaveLength(10);
    expect(new Set(accepted.map((r) => r.body.request_id)).size).toBe(1);
    expect(accepted.filter((r) => !r.replayed)).toHaveLength(1);
    expect(await messageCount([String(accepted[0]?.body.request_id)])).toBe(1);
  });

  it("given two organizations replaying their own keys, one key string shared, in one batch, then each gets its own message", async () => {
    const other = (await onboard(h)).apiKey;
    const shared = `shared-${Date.now()}`;
    const own = `own-${Date.now()}`;
    const keys = [
      { apiKey, key: shared, body: "mine, shared key" },
      { apiKey, key: own, body: "mine, own key" },
      { apiKey: other, key: shared, body: "theirs, shared key" },
    ];
    const first = await Promise.all(
      keys.map((k) => sendSms(h, k.apiKey, sms(k.body), { "idempotency-key": k.key })),
    );
    const firstIds = await Promise.all(
      first.map(async (r) => ((await r.json()) as { request_id: string }).request_id),
    );
    expect(new Set(firstIds).size).toBe(3);
    // The replays arrive together: their held keys are read in one query.
    const again = await Promise.all(
      keys.map((k) => sendSms(h, k.apiKey, sms(k.body), { "idempotency-key": k.key })),
    );
    expect(again.map((r) => [r.status, r.headers.get("idempotent-replayed")])).toEqual(
      keys.map(() => [202, "true"]),
    );
    const againIds = await Promise.all(
      again.map(async (r) => ((await r.json()) as { request_id: string }).request_id),
    );
    expect(againIds).toEqual(firstIds);
    // One organization's key means nothing to another: the same key there creates a new message.
    const crossed = await sendSms(h, other, sms("mine, own key"), { "idempotency-key": own });
    expect(crossed.status).toBe(202);
    expect(crossed.headers.get("idempotent-replayed")).toBeNull();
  });
});
