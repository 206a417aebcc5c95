import { afterAll, describe, expect, it } from "vitest";
import type { MessageEvent } from "../../../src/domain/events.js";
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
] as unknown as MessageEvent[];

describe("webhook_event_type (SQL) and webhookEventTypeOf (domain)", () => {
  it("map every kind of message event the same way", async () => {
    for (const event of events) {
      const [row] = await h.sql<Array<{ type: string | null }>>`
        select webhook_event_type(${event.type}, ${JSON.stringify(event.data)}::jsonb) as type`;
      expect(row?.type ?? undefined, `${event.type} ${JSON.stringify(event.data)}`).toBe(
        webhookEventTypeOf(event),
      );
    }
  });
});
