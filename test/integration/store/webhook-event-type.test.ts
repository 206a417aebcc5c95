import { randomUUID } from "node:crypto";
import { afterAll, describe, expect, it } from "vitest";
import type { MessageEvent } from "../../../src/domain/events.js";
import { RECEIPT_STATES } from "../../../src/domain/receipts.js";
import { webhookEventTypeOf } from "../../../src/domain/webhooks.js";
import { createHarness } from "../../support/harness.js";

/**
 * The fan-out trigger and recover map event types with the SQL function `webhook_event_type`
 * (migration 0012); the domain maps them with `webhookEventTypeOf`. They must agree.
 */
const h = createHarness();
afterAll(() => h.close());

const error = { class: "transient", code: "x", message: "x" };
const events = [
  { type: "accepted", retryCount: 0, occurredAt: "", data: {} },
  { type: "pending", retryCount: 0, occurredAt: "", data: { kind: "attempt_started", attempt: 1 } },
  {
    type: "pending",
    retryCount: 1,
    occurredAt: "",
    data: { kind: "retry_scheduled", attempt: 1, error, retryAt: "2026-11-25T00:00:00.000Z" },
  },
  {
    type: "success",
    retryCount: 0,
    occurredAt: "",
    data: { attempt: 1, provider: "p", providerMessageId: "m" },
  },
  { type: "failed", retryCount: 0, occurredAt: "", data: { reason: "permanent_error", attempt: 1, error } },
  {
    type: "rejected",
    retryCount: 0,
    occurredAt: "",
    data: { reason: "recipient_refused", attempt: 1, error },
  },
  // Every receipt state: `sent` is not sent as a webhook, the outcomes are (docs/decisions/0038).
  ...RECEIPT_STATES.map((state) => ({
    type: "receipt",
    retryCount: 0,
    occurredAt: "",
    data: {
      state,
      errorCode: null,
      provider: "twilio",
      providerStatus: state,
      providerMessageId: null,
      status: "success",
    },
  })),
  // A delayed DSN: history only, never a webhook (docs/decisions/0040).
  {
    type: "delivery_delayed",
    retryCount: 0,
    occurredAt: "",
    data: { errorCode: "4.4.1", provider: "smtp", providerStatus: "delayed", status: "success" },
  },
] as unknown as MessageEvent[];

describe("webhook_event_type (SQL) and webhookEventTypeOf (domain)", () => {
  it("map every kind of message event the same way", async () => {
    expect(events.map((event) => webhookEventTypeOf(event))).toEqual(
      expect.arrayContaining([
        "message.delivered",
        "message.undelivered",
        "message.bounced",
        "message.complained",
      ]),
    );
    expect(webhookEventTypeOf(events.at(-1) as MessageEvent)).toBeUndefined();
    for (const event of events) {
      const [row] = await h.sql<Array<{ type: string | null }>>`
        select webhook_event_type(${event.type}, ${JSON.stringify(event.data)}::jsonb) as type`;
      expect(row?.type ?? undefined, `${event.type} ${JSON.stringify(event.data)}`).toBe(
        webhookEventTypeOf(event),
      );
    }
  });
});

describe("message_events' type check (migration 0013)", () => {
  const insert = (type: string) => h.sql`
    insert into message_events (message_id, seq, type, retry_count, data, occurred_at, organization_id)
    values (${randomUUID()}, 1, ${type}, 0, '{}'::jsonb, now(), ${randomUUID()})`;

  it("takes a receipt and a delay, and still refuses a type the domain does not have", async () => {
    await expect(insert("receipt")).resolves.toBeDefined();
    await expect(insert("delivery_delayed")).resolves.toBeDefined();
    await expect(insert("exploded")).rejects.toMatchObject({ code: "23514" });
  });

  it("messages' delivery_state check refuses a state the domain does not have", async () => {
    const record = (state: string) => h.sql`
      insert into messages (message_id, organization_id, product_id, channel, status, priority, sender,
        retry_enabled, retry_count, version, created_at, updated_at, delivery_state)
      values (${randomUUID()}, ${randomUUID()}, 'p', 'sms', 'success', 'high', 'ACME', true, 0, 3, now(), now(), ${state})`;
    await expect(record("undelivered")).resolves.toBeDefined();
    await expect(record("lost")).rejects.toMatchObject({ code: "23514" });
  });
});
