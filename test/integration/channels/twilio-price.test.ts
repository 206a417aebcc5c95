import { eq } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { messageEvents } from "../../../db/schema.js";
import { createSmsProvider } from "../../../src/channels/sms/providers/index.js";
import { FakeTwilio, TWILIO_ACCOUNT_SID, TWILIO_AUTH_TOKEN } from "../../support/fake-twilio.js";
import { createHarness, eventually, type Harness, onboard, sendSms } from "../../support/harness.js";
import { fetchDocument, responseChecker } from "../../support/openapi.js";

/**
 * What Twilio charges, stored with the outcome (docs/decisions/0043): the worker sends through the
 * Twilio provider to a local stand-in that answers a creation with Twilio's Message resource,
 * `price` null as Twilio nearly always has it then, or a price once known. The success event
 * keeps it; the message's history shows it.
 */

let fake: FakeTwilio;
let h: Harness;
let org: Awaited<ReturnType<typeof onboard>>;
let expectDocumented: ReturnType<typeof responseChecker>;

beforeAll(async () => {
  fake = await FakeTwilio.start("https://notify.example.test");
  h = createHarness({
    SMS_PROVIDER: "twilio",
    TWILIO_ACCOUNT_SID,
    TWILIO_AUTH_TOKEN,
    TWILIO_BASE_URL: fake.baseUrl,
  });
  expectDocumented = responseChecker(await fetchDocument(h.app));
  h.startWorker({ providers: { sms: createSmsProvider(h.config) } });
  org = await onboard(h);
});
afterAll(async () => {
  await h?.close();
  await fake?.close();
});

/** Sends an SMS and waits for its success; returns the success event and the history's entry. */
async function delivered(body: string) {
  const response = await sendSms(h, org.apiKey, { payload: { to: "+14155550100", body } });
  expect(response.status).toBe(202);
  const { request_id: id } = (await response.json()) as { request_id: string };
  const events = await eventually(async () => {
    const rows = await h.db.select().from(messageEvents).where(eq(messageEvents.messageId, id));
    return rows.some((row) => row.type === "success") ? rows : undefined;
  }, 15_000);
  const history = await h.app.request(`/api/v1/messages/${id}/events`, {
    headers: { "x-api-key": org.apiKey },
  });
  expect(history.status).toBe(200);
  await expectDocumented(history, "get", "/api/v1/messages/{message_id}/events");
  const { events: entries } = (await history.json()) as { events: Array<Record<string, unknown>> };
  return {
    stored: events.find((row) => row.type === "success")?.data,
    shown: entries.find((entry) => entry.type === "success"),
  };
}

describe("the Twilio provider's price, stored with the outcome", () => {
  it("given Twilio answers with a price, then the success event keeps it and the history shows it", async () => {
    fake.price = "-0.01500";
    try {
      const { stored, shown } = await delivered("a".repeat(161));
      expect(stored).toMatchObject({ price: { amount: "-0.01500", currency: "USD" }, segments: 2 });
      expect(shown).toMatchObject({
        provider: "twilio",
        price: { amount: "-0.01500", currency: "USD" },
        segments: 2,
      });
    } finally {
      fake.price = null;
    }
  });

  it("given Twilio answers with price null, as at nearly every creation, then no price is stored, the segments are", async () => {
    const { stored, shown } = await delivered("Your code is 123456 😀");
    expect(stored).not.toHaveProperty("price");
    expect(stored).toMatchObject({ segments: 1 });
    expect(shown).not.toHaveProperty("price");
    expect(shown).toMatchObject({ segments: 1 });
  });
});
