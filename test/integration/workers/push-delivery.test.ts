import { afterAll, beforeAll, describe, expect, it } from "vitest";
import webpush from "web-push";
import { WebPushProvider } from "../../../src/channels/push/providers/webpush.js";
import { createHarness, eventually, getMessage, onboard, sendNotification } from "../../support/harness.js";
import { type PushService, startPushService, type VerifiedPush } from "../../support/push-service.js";
import { dataOf, eventsOf } from "./history.js";

const vapid = webpush.generateVAPIDKeys();
const h = createHarness({ VAPID_SUBJECT: "mailto:ops@acme.test", RETRY_BASE_DELAY_MS: "10" });
let service: PushService;
let apiKey = "";
beforeAll(async () => {
  service = await startPushService();
  apiKey = (await onboard(h)).apiKey;
  h.startWorker({
    providers: {
      // The local push service is on loopback, which only OUTBOUND_ALLOWED_NETWORKS opens.
      push: new WebPushProvider({
        vapidPublicKey: vapid.publicKey,
        vapidPrivateKey: vapid.privateKey,
        vapidSubject: "mailto:ops@acme.test",
        timeoutMs: 2000,
        allowedHosts: null,
        allowedNetworks: ["127.0.0.1"],
      }),
    },
  });
});
afterAll(async () => {
  await h.close();
  await service.close();
});

async function send(payload: object, extra: object = {}): Promise<string> {
  const response = await sendNotification(h, "push", apiKey, { payload, ...extra });
  expect(response.status).toBe(202);
  return ((await response.json()) as { request_id: string }).request_id;
}

async function finalRecord(id: string) {
  return eventually(
    async () => {
      const record = (await (await getMessage(h, apiKey, id)).json()) as {
        status: string;
        retry_count: number;
        delivery_time: string | null;
      };
      return ["success", "failed", "rejected"].includes(record.status) ? record : undefined;
    },
    10_000,
    `push ${id} to finish`,
  );
}

async function history(id: string): Promise<unknown> {
  const response = await h.app.request(`/api/v1/messages/${id}/events`, { headers: { "x-api-key": apiKey } });
  expect(response.status).toBe(200);
  return response.json();
}

const pushesTo = (endpoint: string) =>
  service.received().filter((p) => p.path === new URL(endpoint).pathname);

describe("push delivery through the worker to a real (local) push service", () => {
  it("arrives encrypted and VAPID-signed; decrypted it is the title, body, data and message id", async () => {
    const subscription = service.createSubscription();
    const id = await send(
      { to: subscription, title: "Order shipped", body: "Arrives Tuesday", data: { url: "/o/42" }, ttl: 120 },
      { notification_type: "SECURITY_ALERT" },
    );
    const record = await finalRecord(id);
    expect(record).toMatchObject({ status: "success", retry_count: 0 });
    expect(record.delivery_time).not.toBeNull();
    const [push, ...more] = pushesTo(subscription.endpoint);
    expect(more).toEqual([]);
    expect(push?.verified).toBe(true);
    const verified = push as VerifiedPush;
    expect(JSON.parse(verified.plaintext)).toEqual({
      title: "Order shipped",
      body: "Arrives Tuesday",
      data: { url: "/o/42" },
      message_id: id,
    });
    expect(verified.ttl).toBe(120);
    expect(verified.urgency).toBe("high"); // critical tier
    expect(verified.vapid).toEqual({ subject: "mailto:ops@acme.test", publicKey: vapid.publicKey });
  });

  it("without a ttl, the push service keeps it no longer than the message lives (low tier: 24 h)", async () => {
    const subscription = service.createSubscription();
    const id = await send({ to: subscription, title: "t", body: "b" }, { notification_type: "NEWS_UPDATE" });
    await finalRecord(id);
    const push = pushesTo(subscription.endpoint)[0] as VerifiedPush;
    expect(push.urgency).toBe("low");
    expect(push.ttl).toBeGreaterThan(24 * 3600 - 60);
    expect(push.ttl).toBeLessThanOrEqual(24 * 3600);
    expect(JSON.parse(push.plaintext)).toEqual({ title: "t", body: "b", message_id: id });
  });

  it.each([410, 404])(
    "a subscription the push service calls gone (%d) is rejected after one attempt",
    async (status) => {
      const subscription = service.createSubscription();
      service.respondWith(subscription.endpoint, { status });
      const id = await send({ to: subscription, title: "t", body: "b" });
      expect(await finalRecord(id)).toMatchObject({ status: "rejected", retry_count: 0 });
      const last = (await eventsOf(h.db, id)).at(-1);
      expect(dataOf(last)).toMatchObject({
        reason: "recipient_refused",
        error: { code: "subscription_gone" },
      });
      expect(pushesTo(subscription.endpoint)).toHaveLength(1);
    },
  );

  it("a 429 and a 503 are retried, then it succeeds with the same message id inside", async () => {
    const subscription = service.createSubscription();
    service.respondWith(subscription.endpoint, {
      sequence: [{ status: 429, headers: { "retry-after": "0" } }, { status: 503 }],
    });
    const id = await send({ to: subscription, title: "t", body: "b" });
    expect(await finalRecord(id)).toMatchObject({ status: "success", retry_count: 2 });
    const pushes = pushesTo(subscription.endpoint) as VerifiedPush[];
    expect(pushes.map((p) => p.status)).toEqual([429, 503, 201]);
    expect(new Set(pushes.map((p) => JSON.parse(p.plaintext).message_id))).toEqual(new Set([id]));
  });

  it("a 400 from the push service is permanent: failed, not retried", async () => {
    const subscription = service.createSubscription();
    service.respondWith(subscription.endpoint, { status: 400, body: "bad request" });
    const id = await send({ to: subscription, title: "t", body: "b" });
    expect(await finalRecord(id)).toMatchObject({ status: "failed", retry_count: 0 });
    expect(pushesTo(subscription.endpoint)).toHaveLength(1);
  });

  it("an endpoint at an internal address is never requested; its history shows a class and a code", async () => {
    const subscription = service.createSubscription();
    const endpoint = "http://169.254.169.254/latest/meta-data/iam/security-credentials/";
    const id = await send({ to: { ...subscription, endpoint }, title: "t", body: "b" });
    expect(await finalRecord(id)).toMatchObject({ status: "rejected", retry_count: 0 });
    const { events } = (await history(id)) as { events: Array<{ type: string; error?: unknown }> };
    expect(events.at(-1)).toMatchObject({
      type: "rejected",
      error: {
        class: "rejected",
        code: "address_not_allowed",
        message: "Not sent: the address of the push service is not allowed",
      },
    });
  });

  it("no answer's body or header of the push service reaches the history", async () => {
    const subscription = service.createSubscription();
    service.respondWith(subscription.endpoint, {
      sequence: [{ status: 500, body: "ami-id: i-0123 AccessKeyId: ASIAEXAMPLE" }],
    });
    const id = await send({ to: subscription, title: "t", body: "b" });
    expect(await finalRecord(id)).toMatchObject({ status: "success", retry_count: 1 });
    const text = JSON.stringify(await history(id));
    const [, accepted] = pushesTo(subscription.endpoint) as VerifiedPush[];
    expect(text).toContain('"message":"The push service answered HTTP 500"');
    expect(text).toContain(`"provider_message_id":"webpush:${id}:2"`);
    for (const leak of [
      "ASIAEXAMPLE",
      "ami-id",
      accepted?.location ?? "missing",
      new URL(service.url).host,
    ]) {
      expect(text).not.toContain(leak);
    }
  });

  it("nothing the service received failed verification or decryption", () => {
    expect(service.received().filter((p) => !p.verified)).toEqual([]);
  });
});
