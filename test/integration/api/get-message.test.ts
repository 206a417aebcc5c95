import { afterAll, describe, expect, it } from "vitest";
import { createHarness, getMessage, onboard, sendSms } from "../../support/harness.js";

const h = createHarness({ AUTH_CACHE_TTL_MS: "0" });
afterAll(() => h.close());

async function accepted(
  apiKey: string,
  body: unknown = { payload: { to: "+14155550100", body: "hello", sender: "ACME" } },
) {
  const response = await sendSms(h, apiKey, body);
  return ((await response.json()) as { request_id: string }).request_id;
}

describe("GET /api/v1/messages/{message_id}", () => {
  it("returns the record with every field of the spec, named exactly as the spec names them", async () => {
    const org = await onboard(h);
    const id = await accepted(org.apiKey, {
      payload: { to: "+14155550100", body: "hello", sender: "ACME" },
      retry_enabled: false,
      notification_type: "NEWS_UPDATE",
    });
    const response = await getMessage(h, org.apiKey, id);
    expect(response.status).toBe(200);
    const record = (await response.json()) as Record<string, unknown>;
    expect(Object.keys(record).sort()).toEqual(
      [
        "channel",
        "created_at",
        "delivery",
        "delivery_time",
        "message_id",
        "organization_id",
        "payload",
        "product_id",
        "receiver_id",
        "retry_count",
        "send_at",
        "segments",
        "encoding",
        "sender_id",
        "status",
        "status_reason",
        "updated_at",
      ].sort(),
    );
    expect(record).toMatchObject({
      message_id: id,
      channel: "sms",
      status: "accepted",
      status_reason: null,
      send_at: null,
      delivery_time: null,
      delivery: { state: "unknown", updated_at: null, error_code: null },
      organization_id: org.id,
      product_id: org.productId,
      receiver_id: "+14155550100",
      sender_id: "ACME",
      segments: 1,
      encoding: "GSM-7",
      retry_count: 0,
    });
    expect(new Date(record.created_at as string).toISOString()).toBe(record.created_at);
    expect(new Date(record.updated_at as string).toISOString()).toBe(record.updated_at);
    expect(record.payload).toEqual({
      Organization_id: org.id,
      channel: "sms",
      id,
      message: "hello",
      priority: "low",
      product_id: org.productId,
      recipient: "+14155550100",
      retry_enabled: false,
      sender: "ACME",
      retry_count: 0,
      subject: null,
      template_fields: null,
    });
  });

  it("answers 404 for another organization's message, exactly as for an unknown id", async () => {
    const mine = await onboard(h);
    const theirs = await onboard(h);
    const id = await accepted(theirs.apiKey);
    const other = await getMessage(h, mine.apiKey, id);
    const unknown = await getMessage(h, mine.apiKey, "01900000-0000-7000-8000-000000000000");
    expect([other.status, unknown.status]).toEqual([404, 404]);
    expect(await other.json()).toEqual(await unknown.json());
  });

  it("answers 400 for an id that is not a UUID", async () => {
    const org = await onboard(h);
    const response = await getMessage(h, org.apiKey, "12345");
    expect(response.status).toBe(400);
    expect(await response.json()).toEqual({ error: "message_id: message_id must be a UUID" });
  });

  it("finds an id written in upper case", async () => {
    const org = await onboard(h);
    const id = await accepted(org.apiKey);
    expect((await getMessage(h, org.apiKey, id.toUpperCase())).status).toBe(200);
  });
});
