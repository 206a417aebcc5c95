import { createECDH, randomBytes } from "node:crypto";
import { eq } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { messageEvents } from "../../../db/schema.js";
import { createApp } from "../../../src/api/app.js";
import {
  countMessages,
  createHarness,
  expectError,
  getMessage,
  onboard,
  sendNotification,
} from "../../support/harness.js";

const h = createHarness({ VAPID_SUBJECT: "mailto:ops@acme.test" });
let apiKey = "";
let organizationId = "";
beforeAll(async () => {
  const org = await onboard(h);
  apiKey = org.apiKey;
  organizationId = org.id;
});
afterAll(() => h.close());

const ecdh = createECDH("prime256v1");
ecdh.generateKeys();
const subscription = {
  endpoint: "https://push.example.test/send/abc123",
  expirationTime: null,
  keys: { p256dh: ecdh.getPublicKey().toString("base64url"), auth: randomBytes(16).toString("base64url") },
};
const valid = {
  payload: {
    to: subscription,
    title: "Your order shipped",
    body: "It arrives Tuesday",
    data: { url: "/orders/42" },
  },
};

const send = (body: unknown, headers: Record<string, string> = {}, query = "") =>
  sendNotification(h, "push", apiKey, body, headers, query);

async function acceptedId(body: unknown): Promise<string> {
  const response = await send(body);
  expect(response.status).toBe(202);
  const answer = (await response.json()) as { message: string; request_id: string };
  expect(answer.message).toBe("Push notification accepted");
  return answer.request_id;
}

describe("POST /api/v1/notifications/push", () => {
  it("accepts a browser's PushSubscription.toJSON() as recipient with 202", async () => {
    const id = await acceptedId(valid);
    const events = await h.db.select().from(messageEvents).where(eq(messageEvents.messageId, id));
    expect(events.map((e) => [e.seq, e.type])).toEqual([[1, "accepted"]]);
  });

  it("fills the record: endpoint as recipient, VAPID subject as sender, title as subject, body as message", async () => {
    const id = await acceptedId({ ...valid, notification_type: "SECURITY_ALERT" });
    const record = (await (await getMessage(h, apiKey, id)).json()) as Record<string, unknown> & {
      payload: Record<string, unknown>;
    };
    expect(record).toMatchObject({
      channel: "push",
      status: "accepted",
      receiver_id: subscription.endpoint,
      sender_id: "mailto:ops@acme.test",
    });
    expect(record.payload).toMatchObject({
      channel: "push",
      recipient: subscription.endpoint,
      sender: "mailto:ops@acme.test",
      subject: "Your order shipped",
      message: "It arrives Tuesday",
      template_fields: null,
      priority: "critical",
    });
  });

  it("never puts the subscription's keys in the record", async () => {
    const id = await acceptedId(valid);
    const text = await (await getMessage(h, apiKey, id)).text();
    expect(text).not.toContain(subscription.keys.auth);
    expect(text).not.toContain(subscription.keys.p256dh);
  });

  it("accepts a subscription without expirationTime, data or ttl", async () => {
    const { expirationTime: _, ...bare } = subscription;
    await acceptedId({ payload: { to: bare, title: "t", body: "b" } });
  });

  describe("refuses bad input with 400 naming the field, storing nothing", () => {
    const withTo = (patch: object) => ({ payload: { ...valid.payload, to: { ...subscription, ...patch } } });
    const withKeys = (patch: object) => withTo({ keys: { ...subscription.keys, ...patch } });
    const bigData = { blob: "x".repeat(3800) };
    it.each([
      ["a missing subscription", { payload: { title: "t", body: "b" } }, /payload\.to: is required/],
      [
        "an endpoint that is not a URL",
        withTo({ endpoint: "push-service" }),
        /to\.endpoint: must be an http\(s\) URL/,
      ],
      ["an ftp endpoint", withTo({ endpoint: "ftp://push.example.test/x" }), /to\.endpoint/],
      ["missing keys", withTo({ keys: undefined }), /to\.keys: is required/],
      ["a p256dh of the wrong length", withKeys({ p256dh: randomBytes(33).toString("base64url") }), /p256dh/],
      [
        "a compressed p256dh",
        withKeys({ p256dh: Buffer.concat([Buffer.from([2]), randomBytes(64)]).toString("base64url") }),
        /p256dh: must be an uncompressed/,
      ],
      [
        "an auth secret of the wrong length",
        withKeys({ auth: randomBytes(8).toString("base64url") }),
        /auth: must be/,
      ],
      [
        "an auth secret that is not base64url",
        withKeys({ auth: "not base64 at all!!" }),
        /auth: must be base64url/,
      ],
      ["an unknown key", withKeys({ extra: "x" }), /extra/],
      ["a blank title", { payload: { ...valid.payload, title: " " } }, /title: must not be empty/],
      ["a missing body", { payload: { to: subscription, title: "t" } }, /body/],
      [
        "a body over 2000 characters",
        { payload: { ...valid.payload, body: "b".repeat(2001) } },
        /body: must be at most 2000/,
      ],
      ["a negative ttl", { payload: { ...valid.payload, ttl: -1 } }, /ttl: must be at least 0/],
      ["a ttl over 28 days", { payload: { ...valid.payload, ttl: 2419201 } }, /ttl: must be at most/],
      ["a fractional ttl", { payload: { ...valid.payload, ttl: 1.5 } }, /ttl: must be a whole number/],
      [
        "data too large for one Web Push record",
        { payload: { ...valid.payload, data: bigData } },
        /at most 3800 bytes/,
      ],
      ["an unknown field", { payload: { ...valid.payload, icon: "/x.png" } }, /icon/],
    ])("%s", async (_, body, pattern) => {
      const before = await countMessages(h, organizationId);
      await expectError(await send(body), 400, pattern);
      expect(await countMessages(h, organizationId)).toBe(before);
    });
  });

  describe("PUSH_ENDPOINT_HOSTS keeps endpoints on the push services it names", () => {
    const restricted = createApp({
      ...h.deps,
      config: {
        ...h.config,
        PUSH_ENDPOINT_HOSTS: ["fcm.googleapis.com", "*.push.apple.com", "127.0.0.1:4000"],
      },
    });
    const sendTo = (endpoint: string, query = "") =>
      restricted.request(`/api/v1/notifications/push${query}`, {
        method: "POST",
        headers: { "content-type": "application/json", "x-api-key": apiKey },
        body: JSON.stringify({ payload: { ...valid.payload, to: { ...subscription, endpoint } } }),
      });

    it.each([
      "https://fcm.googleapis.com/fcm/send/abc",
      "https://web.push.apple.com/QGu",
      "https://FCM.googleapis.com/fcm/send/abc",
      "https://fcm.googleapis.com:443/fcm/send/abc",
      "http://127.0.0.1:4000/push/x",
    ])("accepts %s", async (endpoint) => {
      expect((await sendTo(endpoint)).status).toBe(202);
    });

    it.each([
      ["http://169.254.169.254/latest/meta-data", "169.254.169.254"],
      ["https://push.apple.com.evil.test/x", "push.apple.com.evil.test"],
      ["https://evilfcm.googleapis.com.test/x", "evilfcm.googleapis.com.test"],
      ["http://127.0.0.1:5432/x", "127.0.0.1:5432"],
      // A host pattern without a port is HTTPS on port 443 only.
      ["http://fcm.googleapis.com/fcm/send/abc", "fcm.googleapis.com"],
      ["https://fcm.googleapis.com:6379/x", "fcm.googleapis.com:6379"],
      ["https://web.push.apple.com:22/x", "web.push.apple.com:22"],
      ["http://web.push.apple.com/x", "web.push.apple.com"],
    ])("refuses %s with 400, storing nothing, dry run included", async (endpoint, host) => {
      const before = await countMessages(h, organizationId);
      await expectError(
        await sendTo(endpoint),
        400,
        new RegExp(`${host.replaceAll(".", "\\.")} is not an allowed push service`),
      );
      await expectError(await sendTo(endpoint, "?dry_run=true"), 400);
      expect(await countMessages(h, organizationId)).toBe(before);
    });
  });

  it("validates without storing on ?dry_run=true", async () => {
    const before = await countMessages(h, organizationId);
    const response = await send(valid, {}, "?dry_run=true");
    expect(response.status).toBe(200);
    expect(await countMessages(h, organizationId)).toBe(before);
  });

  it("replays the first 202 for a repeated Idempotency-Key and answers 422 for another body", async () => {
    const headers = { "Idempotency-Key": `push-${Date.now()}` };
    const first = (await (await send(valid, headers)).json()) as { request_id: string };
    const again = await send(valid, headers);
    expect(again.headers.get("Idempotent-Replayed")).toBe("true");
    expect(((await again.json()) as { request_id: string }).request_id).toBe(first.request_id);
    await expectError(await send({ payload: { ...valid.payload, title: "Other" } }, headers), 422);
  });
});
