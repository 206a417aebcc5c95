import { createECDH } from "node:crypto";
import { eq } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { messageEvents } from "../../../db/schema.js";
import { createApp } from "../../../src/api/app.js";
import { acceptMessage } from "../../../src/messages/accept.js";
import {
  countMessages,
  createHarness,
  expectError,
  getMessage,
  onboard,
  sendNotification,
  sendSms,
} from "../../support/harness.js";
import { fetchDocument, responseChecker } from "../../support/openapi.js";

/**
 * An SMS body's segments and encoding (docs/decisions/0043), through the in-process app on the
 * real Postgres: counted at acceptance, answered in the 202 (and the dry run's 200, and a replay),
 * kept in clear in the accepted event, and a body over `SMS_MAX_SEGMENTS` refused.
 */

const h = createHarness();
let apiKey = "";
let organizationId = "";
let expectDocumented: ReturnType<typeof responseChecker>;
beforeAll(async () => {
  const org = await onboard(h);
  apiKey = org.apiKey;
  organizationId = org.id;
  expectDocumented = responseChecker(await fetchDocument(h.app));
});
afterAll(() => h.close());

const SMS = "/api/v1/notifications/sms";
const PUSH_KEY = (() => {
  const ecdh = createECDH("prime256v1");
  ecdh.generateKeys();
  return ecdh.getPublicKey().toString("base64url");
})();
const sms = (body: string) => ({ payload: { to: "+14155550100", body } });

async function accepted(response: Response) {
  expect(response.status, await response.clone().text()).toBe(202);
  await expectDocumented(response, "post", SMS);
  return (await response.json()) as {
    message: string;
    request_id: string;
    segments: number;
    encoding: string;
  };
}

describe("POST /api/v1/notifications/sms: segments and encoding", () => {
  it("given an OTP, then the 202 says one GSM-7 segment beside message and request_id", async () => {
    const body = await accepted(await sendSms(h, apiKey, sms("Your code is 123456")));
    expect(Object.keys(body)).toEqual(["message", "request_id", "segments", "encoding"]);
    expect(body).toMatchObject({ message: "SMS notification accepted", segments: 1, encoding: "GSM-7" });
  });

  it.each([
    ["160 GSM-7 characters", "a".repeat(160), 1, "GSM-7"],
    ["161 GSM-7 characters", "a".repeat(161), 2, "GSM-7"],
    ["307 GSM-7 characters", "a".repeat(307), 3, "GSM-7"],
    ["80 €, two septets each", "€".repeat(80), 1, "GSM-7"],
    ["81 €", "€".repeat(81), 2, "GSM-7"],
    ["[]{} twenty times and one more", `${"[]{}".repeat(20)}x`, 2, "GSM-7"],
    ["one emoji", "Your code is 123456 🔐", 1, "UCS-2"],
    ["70 UCS-2 units", "Ж".repeat(70), 1, "UCS-2"],
    ["71 UCS-2 units", "Ж".repeat(71), 2, "UCS-2"],
  ])("given %s, then the 202 counts the published rules", async (_, text, segments, encoding) => {
    expect(await accepted(await sendSms(h, apiKey, sms(text)))).toMatchObject({ segments, encoding });
  });

  it("given an accepted SMS, then its accepted event keeps segments and encoding in clear, the body sealed", async () => {
    const { request_id } = await accepted(await sendSms(h, apiKey, sms(`${"a".repeat(200)} 😀`)));
    const [event] = await h.db.select().from(messageEvents).where(eq(messageEvents.messageId, request_id));
    expect(event?.data).toMatchObject({ channel: "sms", segments: 4, encoding: "UCS-2" });
    expect(event?.data).not.toHaveProperty("body");
    expect(event?.contentEnc).not.toBeNull();
  });

  it("given ?dry_run=true, then the 200 counts the body too, storing nothing", async () => {
    const before = await countMessages(h, organizationId);
    const response = await sendSms(h, apiKey, sms("a".repeat(161)), {}, "?dry_run=true");
    expect(response.status).toBe(200);
    await expectDocumented(response, "post", SMS);
    expect(await response.json()).toEqual({
      message: "SMS notification is valid; nothing was stored or sent (dry run)",
      segments: 2,
      encoding: "GSM-7",
    });
    expect(await countMessages(h, organizationId)).toBe(before);
  });

  it("given the same Idempotency-Key and body again, then the replay says the same segments and encoding", async () => {
    const headers = { "idempotency-key": `segments-${Date.now()}` };
    const first = await accepted(await sendSms(h, apiKey, sms("Привет! 😀"), headers));
    const replay = await sendSms(h, apiKey, sms("Привет! 😀"), headers);
    expect(replay.headers.get("idempotent-replayed")).toBe("true");
    expect(await accepted(replay)).toEqual(first);
    expect(first).toMatchObject({ segments: 1, encoding: "UCS-2" });
  });
});

describe("the record: top-level segments and encoding", () => {
  const record = async (id: string) => {
    const response = await getMessage(h, apiKey, id);
    expect(response.status).toBe(200);
    await expectDocumented(response, "get", "/api/v1/messages/{message_id}");
    return (await response.json()) as { segments: number | null; encoding: string | null };
  };

  it("given an SMS, then GET and the listing show what the 202 said", async () => {
    const answer = await accepted(await sendSms(h, apiKey, sms(`${"Ж".repeat(100)} 😀`)));
    expect(answer).toMatchObject({ segments: 2, encoding: "UCS-2" });
    expect(await record(answer.request_id)).toMatchObject({ segments: 2, encoding: "UCS-2" });

    const listing = await h.app.request("/api/v1/messages?limit=100", { headers: { "x-api-key": apiKey } });
    expect(listing.status).toBe(200);
    await expectDocumented(listing, "get", "/api/v1/messages");
    const { messages } = (await listing.json()) as {
      messages: Array<{ message_id: string; segments: number | null; encoding: string | null }>;
    };
    expect(messages.find((m) => m.message_id === answer.request_id)).toMatchObject({
      segments: 2,
      encoding: "UCS-2",
    });
  });

  it("given a push notification, then its 202 is unchanged and its record's segments and encoding are null", async () => {
    const response = await sendNotification(h, "push", apiKey, {
      payload: {
        to: {
          endpoint: "https://push.simulator.notify.test/ok",
          keys: { p256dh: PUSH_KEY, auth: "AAAAAAAAAAAAAAAAAAAAAA" },
        },
        title: "Shipped",
        body: "It arrives Tuesday",
      },
    });
    expect(response.status, await response.clone().text()).toBe(202);
    const body = (await response.json()) as { request_id: string };
    expect(Object.keys(body)).toEqual(["message", "request_id"]);
    expect(await record(body.request_id)).toMatchObject({ segments: null, encoding: null });
  });

  it("given an SMS accepted before segments were counted (its event has neither field), then its record says null", async () => {
    const organization = await onboard(h);
    const { messageId } = (await acceptMessage(h.deps, {
      organization: {
        id: organization.id,
        productId: organization.productId,
        name: organization.name,
        active: true,
      },
      content: { channel: "sms", recipient: "+14155550100", sender: "ACME", body: "from before" },
      retryEnabled: true,
      notificationType: undefined,
    })) as { messageId: string };
    const [event] = await h.db.select().from(messageEvents).where(eq(messageEvents.messageId, messageId));
    expect(event?.data).not.toHaveProperty("segments");
    const response = await getMessage(h, organization.apiKey, messageId);
    expect(await response.json()).toMatchObject({
      segments: null,
      encoding: null,
      payload: { message: "from before" },
    });
  });
});

describe("SMS_MAX_SEGMENTS (default 10)", () => {
  it("given a body of exactly 10 segments (1,530 GSM-7 characters), then it is accepted", async () => {
    expect(await accepted(await sendSms(h, apiKey, sms("a".repeat(1530))))).toMatchObject({ segments: 10 });
  });

  it.each([
    ["1,531 GSM-7 characters", "a".repeat(1531), 11, "GSM-7"],
    ["1,600 €", "€".repeat(1600), 22, "GSM-7"],
    ["671 UCS-2 units", "Ж".repeat(671), 11, "UCS-2"],
  ])(
    "given %s, then a 400 says how many segments it needs, storing nothing",
    async (_, text, segments, encoding) => {
      const before = await countMessages(h, organizationId);
      const error = await expectError(await sendSms(h, apiKey, sms(text)), 400);
      expect(error).toBe(
        `payload.body needs ${segments} segments (${encoding}); at most 10 are allowed (SMS_MAX_SEGMENTS)`,
      );
      expect(await countMessages(h, organizationId)).toBe(before);
    },
  );

  it("given a dry run over the maximum, then it is refused the same way", async () => {
    await expectError(
      await sendSms(h, apiKey, sms("a".repeat(1531)), {}, "?dry_run=true"),
      400,
      /needs 11 segments/,
    );
  });

  it("given a body over 1600 characters, then the length rule answers first, as before", async () => {
    await expectError(await sendSms(h, apiKey, sms("a".repeat(1601))), 400, /at most 1600 characters/);
  });

  it("given a lower maximum, then it applies to new requests, and the retry of one accepted before still gets its replay", async () => {
    const lowered = createApp({ ...h.deps, config: { ...h.config, SMS_MAX_SEGMENTS: 1 } });
    const send = (headers: Record<string, string> = {}) =>
      lowered.request(SMS, {
        method: "POST",
        headers: { "content-type": "application/json", "x-api-key": apiKey, ...headers },
        body: JSON.stringify(sms("a".repeat(200))),
      });
    const headers = { "idempotency-key": `lowered-${Date.now()}` };
    const first = await accepted(await sendSms(h, apiKey, sms("a".repeat(200)), headers));

    const replay = await send(headers);
    expect(replay.headers.get("idempotent-replayed")).toBe("true");
    expect(await accepted(replay)).toEqual(first);
    await expectError(
      await send(),
      400,
      /^payload\.body needs 2 segments \(GSM-7\); at most 1 are allowed \(SMS_MAX_SEGMENTS\)$/,
    );
    await expectError(await send({ "idempotency-key": `new-${Date.now()}` }), 400, /needs 2 segments/);
  });
});
