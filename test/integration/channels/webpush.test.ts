import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import webpush from "web-push";
import type {
  PushMessage,
  PushSubscription,
  PushUrgency,
} from "../../../src/channels/push/providers/provider.js";
import {
  WebPushProvider,
  type WebPushProviderOptions,
} from "../../../src/channels/push/providers/webpush.js";
import type { DeliveryOutcome } from "../../../src/domain/delivery-outcome.js";
import { type PushService, type ReceivedPush, startPushService } from "../../support/push-service.js";

const VAPID = webpush.generateVAPIDKeys();
const SUBJECT = "mailto:ops@notify.test";

/** A port nothing listens on: bind one, then let it go. */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

function message(subscription: PushSubscription, overrides: Partial<PushMessage> = {}): PushMessage {
  return {
    messageId: "4c1f8a3e-6a0b-4d2e-9b7a-1e2f3a4b5c6d",
    subscription,
    payload: JSON.stringify({
      title: "Your order shipped",
      body: "Arrives Thursday — track it ✓",
      data: { id: 7 },
    }),
    ttlSeconds: 3600,
    urgency: "high",
    attempt: 1,
    ...overrides,
  };
}

/**
 * A failed outcome: `message` is the one tenants read; `detail` (what the push service said, for
 * the worker's log) is there unless `null`.
 */
function failure(
  cls: string,
  code: string,
  message: unknown = expect.any(String),
  { retryAfterMs, detail = expect.any(String) }: { retryAfterMs?: number; detail?: unknown } = {},
) {
  return {
    ok: false,
    provider: "webpush",
    error: { class: cls, code, message, ...(retryAfterMs === undefined ? {} : { retryAfterMs }) },
    ...(detail === null ? {} : { detail }),
  };
}

describe("WebPushProvider against a local push service", () => {
  let service: PushService;
  /** Paths whose refused requests a test expects; any other refusal fails the test. */
  const refusalsExpectedAt = new Set<string>();

  beforeAll(async () => {
    service = await startPushService();
  });
  afterAll(() => service.close());
  afterEach(() => {
    const unexpected = service.received().filter((p) => !p.verified && !refusalsExpectedAt.has(p.path));
    expect(unexpected).toEqual([]);
  });

  /** The local push service is on loopback: its host is allowed, and so is 127.0.0.1. */
  function provider(overrides: Partial<WebPushProviderOptions> = {}) {
    return new WebPushProvider({
      vapidPublicKey: VAPID.publicKey,
      vapidPrivateKey: VAPID.privateKey,
      vapidSubject: SUBJECT,
      timeoutMs: 5000,
      allowedHosts: [new URL(service.url).host],
      allowedNetworks: ["127.0.0.1"],
      ...overrides,
    });
  }

  function pushesTo(subscription: PushSubscription): ReceivedPush[] {
    const path = new URL(subscription.endpoint).pathname;
    return service.received().filter((p) => p.path === path);
  }

  /** Sends, and checks what every outcome must satisfy: no key, token or header leaks out. */
  async function send(m: PushMessage, p = provider()): Promise<DeliveryOutcome> {
    const outcome = await p.send(m);
    const serialised = JSON.stringify(outcome);
    expect(serialised).not.toContain(VAPID.privateKey);
    for (const push of pushesTo(m.subscription)) {
      const authorization = push.headers.authorization ?? "";
      expect(serialised).not.toContain(authorization);
      expect(serialised).not.toContain(/t=([^,\s]+)/.exec(authorization)?.[1] ?? "unreachable");
    }
    return outcome;
  }

  it("is named webpush", () => {
    expect(provider().name).toBe("webpush");
  });

  it("a message arrives decrypted with its exact payload, TTL, Urgency and VAPID identity", async () => {
    const subscription = service.createSubscription();
    const m = message(subscription);
    const outcome = await send(m);

    const [push, ...others] = pushesTo(subscription);
    expect(others).toEqual([]);
    expect(push).toMatchObject({
      verified: true,
      ttl: 3600,
      urgency: "high",
      vapid: { subject: SUBJECT, publicKey: VAPID.publicKey },
      plaintext: m.payload,
      status: 201,
      headers: {
        "content-encoding": "aes128gcm",
        "content-type": "application/octet-stream",
        topic: m.messageId.replaceAll("-", ""),
      },
    });
    // The id is ours; the Location (a URL of the push service's choosing) is only logged.
    expect(outcome).toStrictEqual({
      ok: true,
      provider: "webpush",
      providerMessageId: `webpush:${m.messageId}:1`,
      detail: `push service ${new URL(service.url).host} accepted it as ${push?.verified ? push.location : "missing"}`,
    });
  });

  it.each<PushUrgency>(["very-low", "low", "normal", "high"])(
    "urgency %s is sent as given",
    async (urgency) => {
      const subscription = service.createSubscription();
      expect(await send(message(subscription, { urgency, ttlSeconds: 0 }))).toMatchObject({ ok: true });
      expect(pushesTo(subscription)).toMatchObject([{ verified: true, urgency, ttl: 0 }]);
    },
  );

  it("a 2xx without Location succeeds with an id stable for the message and attempt", async () => {
    const subscription = service.createSubscription();
    service.respondWith(subscription.endpoint, { status: 202 });
    expect(await send(message(subscription, { attempt: 3 }))).toStrictEqual({
      ok: true,
      provider: "webpush",
      providerMessageId: "webpush:4c1f8a3e-6a0b-4d2e-9b7a-1e2f3a4b5c6d:3",
    });
  });

  it.each([410, 404])("a %i means the subscription is gone: rejected", async (status) => {
    const subscription = service.createSubscription();
    service.respondWith(subscription.endpoint, {
      status,
      body: "push subscription has unsubscribed or expired.\n",
    });
    const outcome = await send(message(subscription));
    expect(outcome).toStrictEqual(
      failure("rejected", "subscription_gone", `The push service answered HTTP ${status}`, {
        detail: `push service ${new URL(service.url).host} answered HTTP ${status}: push subscription has unsubscribed or expired.`,
      }),
    );
    expect(pushesTo(subscription)).toMatchObject([{ verified: true, status }]);
  });

  it("an endpoint the push service does not know is gone too", async () => {
    const subscription = service.createSubscription();
    const unknown = { ...subscription, endpoint: `${service.url}/push/never-created` };
    refusalsExpectedAt.add("/push/never-created");
    expect(await send(message(unknown))).toStrictEqual(failure("rejected", "subscription_gone"));
  });

  it("a 429 with Retry-After: 7 is transient and asks for a 7000 ms wait", async () => {
    const subscription = service.createSubscription();
    service.respondWith(subscription.endpoint, { status: 429, headers: { "Retry-After": "7" } });
    expect(await send(message(subscription))).toStrictEqual(
      failure("transient", "rate_limited", "The push service answered HTTP 429", { retryAfterMs: 7000 }),
    );
  });

  it("a 429 with Retry-After as an HTTP date waits until that date", async () => {
    const subscription = service.createSubscription();
    const retryAt = new Date(Date.now() + 10_000).toUTCString();
    service.respondWith(subscription.endpoint, { status: 429, headers: { "Retry-After": retryAt } });
    const outcome = await send(message(subscription));
    if (outcome.ok) throw new Error("expected a failure");
    expect(outcome.error).toMatchObject({ class: "transient", code: "rate_limited" });
    // The header has one-second precision, so the wait is a little under ten seconds.
    expect(outcome.error.retryAfterMs).toBeGreaterThan(8000);
    expect(outcome.error.retryAfterMs).toBeLessThanOrEqual(10_000);
  });

  it("a 429 without Retry-After is transient with no suggested wait", async () => {
    const subscription = service.createSubscription();
    service.respondWith(subscription.endpoint, { status: 429 });
    expect(await send(message(subscription))).toStrictEqual(failure("transient", "rate_limited"));
  });

  it.each([500, 502, 503])("a %i is transient", async (status) => {
    const subscription = service.createSubscription();
    service.respondWith(subscription.endpoint, {
      status,
      body: "<html><body>upstream\n\n  trouble</body></html>",
    });
    const outcome = await send(message(subscription));
    expect(outcome).toStrictEqual(
      failure("transient", `http_${status}`, `The push service answered HTTP ${status}`, {
        detail: expect.stringContaining("<html><body>upstream trouble"),
      }),
    );
  });

  it("failures give way to success once the service recovers", async () => {
    const subscription = service.createSubscription();
    service.respondWith(subscription.endpoint, { sequence: [{ status: 503 }, { status: 503 }] });
    const p = provider();
    const outcomes = [];
    for (let attempt = 1; attempt <= 3; attempt++)
      outcomes.push(await send(message(subscription, { attempt }), p));
    expect(outcomes).toStrictEqual([
      failure("transient", "http_503"),
      failure("transient", "http_503"),
      {
        ok: true,
        provider: "webpush",
        providerMessageId: "webpush:4c1f8a3e-6a0b-4d2e-9b7a-1e2f3a4b5c6d:3",
        detail: expect.stringMatching(/accepted it as http:\/\/127\.0\.0\.1:\d+\/message\//),
      },
    ]);
  });

  it("a 413 is permanent: the same payload will never fit", async () => {
    const subscription = service.createSubscription();
    service.respondWith(subscription.endpoint, { status: 413 });
    expect(await send(message(subscription))).toStrictEqual(failure("permanent", "payload_too_large"));
  });

  it("a payload past the service's 4096-byte limit gets a real 413", async () => {
    const subscription = service.createSubscription();
    refusalsExpectedAt.add(new URL(subscription.endpoint).pathname);
    const outcome = await send(
      message(subscription, { payload: JSON.stringify({ body: "x".repeat(5000) }) }),
    );
    expect(outcome).toStrictEqual(failure("permanent", "payload_too_large"));
  });

  it.each([400, 401, 403])("a %i (bad VAPID token or request) is permanent", async (status) => {
    const subscription = service.createSubscription();
    service.respondWith(subscription.endpoint, { status, body: '{"reason":"BadJwtToken"}' });
    expect(await send(message(subscription))).toStrictEqual(
      failure("permanent", `http_${status}`, `The push service answered HTTP ${status}`, {
        detail: expect.stringContaining('{"reason":"BadJwtToken"}'),
      }),
    );
  });

  it("a long error body is cut to a short excerpt in the log's detail, and never in the message", async () => {
    const subscription = service.createSubscription();
    service.respondWith(subscription.endpoint, { status: 400, body: "y".repeat(10_000) });
    const outcome = await send(message(subscription));
    if (outcome.ok) throw new Error("expected a failure");
    expect(outcome.error.message).toBe("The push service answered HTTP 400");
    expect(outcome.detail?.length).toBeLessThanOrEqual(1000);
    expect(outcome.detail).toContain("yyyy");
  });

  it("a body that echoes the private key is redacted", async () => {
    const subscription = service.createSubscription();
    service.respondWith(subscription.endpoint, { status: 400, body: `unexpected key ${VAPID.privateKey}` });
    expect(await send(message(subscription))).toStrictEqual(
      failure("permanent", "http_400", "The push service answered HTTP 400", {
        detail: expect.stringContaining("unexpected key [redacted]"),
      }),
    );
  });

  it("a body that echoes the subscription keeps it out of the log's detail", async () => {
    const subscription = service.createSubscription();
    service.respondWith(subscription.endpoint, {
      status: 400,
      body: `bad subscription ${subscription.endpoint} auth=${subscription.keys.auth}`,
    });
    const outcome = await send(message(subscription));
    expect(outcome).toMatchObject({
      detail: expect.stringContaining("bad subscription [recipient] auth=[recipient]"),
    });
    expect(JSON.stringify(outcome)).not.toContain(new URL(subscription.endpoint).pathname);
  });

  it("a response that echoes the Authorization header or its token is redacted", async () => {
    const subscription = service.createSubscription();
    let sentAuthorization = "";
    const echoing = provider({
      fetch: async (_url, init) => {
        sentAuthorization = new Headers(init?.headers).get("authorization") ?? "";
        const token = /t=([^,\s]+)/.exec(sentAuthorization)?.[1];
        return new Response(`rejected ${sentAuthorization} / ${token}`, { status: 403 });
      },
    });
    const outcome = await echoing.send(message(subscription));
    expect(sentAuthorization).toMatch(/^vapid t=.+, k=/);
    expect(outcome).toStrictEqual(
      failure("permanent", "http_403", "The push service answered HTTP 403", {
        detail: expect.stringContaining("[redacted] / [redacted]"),
      }),
    );
    expect(JSON.stringify(outcome)).not.toContain(sentAuthorization.slice("vapid t=".length, 60));
  });

  it("a service that never answers is transient, within about the time-out", async () => {
    const subscription = service.createSubscription();
    service.respondWith(subscription.endpoint, { hang: true });
    const started = performance.now();
    const outcome = await send(message(subscription), provider({ timeoutMs: 300 }));
    const elapsed = performance.now() - started;
    expect(outcome).toStrictEqual(
      failure("transient", "timeout", "No answer from the push service within 300 ms"),
    );
    expect(elapsed).toBeGreaterThanOrEqual(250);
    expect(elapsed).toBeLessThan(2000);
    expect(pushesTo(subscription)).toMatchObject([{ verified: true, status: undefined }]);
  });

  it("a refused connection is a transient network error whose message names no address or port", async () => {
    const subscription = service.createSubscription();
    const port = await closedPort();
    const endpoint = `http://127.0.0.1:${port}/push/abc`;
    expect(
      await send(message({ ...subscription, endpoint }), provider({ allowedHosts: null })),
    ).toStrictEqual(
      failure("transient", "network_error", "Could not reach the push service", {
        detail: expect.stringMatching(new RegExp(`ECONNREFUSED.*127\\.0\\.0\\.1:${port}`)),
      }),
    );
  });

  it("an injected fetch that throws a non-Error still yields an outcome", async () => {
    const subscription = service.createSubscription();
    const p = provider({
      fetch: async () => {
        throw "not even an Error";
      },
    });
    expect(await send(message(subscription), p)).toStrictEqual(
      failure("transient", "network_error", "Could not reach the push service", {
        detail: expect.stringContaining("not even an Error"),
      }),
    );
  });

  it("a redirect is not followed and is permanent", async () => {
    const subscription = service.createSubscription();
    service.respondWith(subscription.endpoint, {
      status: 307,
      headers: { Location: "http://127.0.0.1:1/elsewhere" },
    });
    expect(await send(message(subscription))).toStrictEqual(
      failure("permanent", "http_307", "The push service answered HTTP 307"),
    );
    expect(pushesTo(subscription)).toHaveLength(1);
  });

  it.each([
    ["a p256dh that is not a P-256 point", { p256dh: Buffer.alloc(65, 1).toString("base64url") }],
    ["an auth secret shorter than 16 bytes", { auth: Buffer.alloc(8, 1).toString("base64url") }],
  ])("a subscription with %s is rejected without a request", async (_case, keys) => {
    const subscription = service.createSubscription();
    const broken = { ...subscription, keys: { ...subscription.keys, ...keys } };
    expect(await send(message(broken))).toStrictEqual(
      failure("rejected", "invalid_subscription", expect.any(String), { detail: null }),
    );
    expect(pushesTo(subscription)).toEqual([]);
  });

  it("a subscription endpoint that is not http(s) is rejected without a request", async () => {
    const subscription = service.createSubscription();
    expect(await send(message({ ...subscription, endpoint: "ftp://push.example/abc" }))).toStrictEqual(
      failure("rejected", "invalid_subscription", expect.any(String), { detail: null }),
    );
  });

  it("a negative TTL cannot be sent and is permanent", async () => {
    const subscription = service.createSubscription();
    expect(await send(message(subscription, { ttlSeconds: -1 }))).toStrictEqual(
      failure("permanent", "invalid_request", "Could not build the push request"),
    );
    expect(pushesTo(subscription)).toEqual([]);
  });
});

describe("WebPushProvider's VAPID configuration", () => {
  const other = webpush.generateVAPIDKeys();
  const options = {
    vapidPublicKey: VAPID.publicKey,
    vapidPrivateKey: VAPID.privateKey,
    vapidSubject: SUBJECT,
    timeoutMs: 1000,
    allowedHosts: null,
  };

  it.each([
    ["a private key of the wrong length", { vapidPrivateKey: VAPID.privateKey.slice(0, 20) }, /32 bytes/],
    ["a private key that is not base64url", { vapidPrivateKey: `${VAPID.privateKey.slice(1)}+` }, /Base 64/],
    ["a missing private key", { vapidPrivateKey: "" }, /privateKey/],
    ["a public key of the wrong length", { vapidPublicKey: VAPID.publicKey.slice(0, 40) }, /65 bytes/],
    ["a public key from another pair", { vapidPublicKey: other.publicKey }, /does not belong/],
    ["a subject that is not a URL", { vapidSubject: "ops@notify.test" }, /subject/],
    ["an http: subject", { vapidSubject: "http://notify.test/contact" }, /https: or mailto:/],
  ])("%s stops the constructor with an error naming the problem", (_case, override, problem) => {
    const build = () => new WebPushProvider({ ...options, ...override });
    expect(build).toThrow(/invalid VAPID configuration/);
    expect(build).toThrow(problem);
  });

  it("the constructor's error never contains the private key", () => {
    try {
      new WebPushProvider({ ...options, vapidPublicKey: other.publicKey });
      expect.unreachable();
    } catch (err) {
      expect(String(err)).not.toContain(VAPID.privateKey);
    }
  });
});

describe("the test push service refuses what a real one would", () => {
  let service: PushService;

  beforeAll(async () => {
    service = await startPushService();
  });
  afterAll(() => service.close());

  /** A request as web-push builds it, sent raw so each test can spoil one part. */
  async function post(
    subscription: PushSubscription,
    spoil: (headers: Record<string, string>, body: Buffer) => Buffer = (_h, body) => body,
    payload = "hello",
  ) {
    const request = webpush.generateRequestDetails(subscription, payload, {
      TTL: 60,
      contentEncoding: "aes128gcm",
      vapidDetails: { subject: SUBJECT, publicKey: VAPID.publicKey, privateKey: VAPID.privateKey },
    });
    const headers = Object.fromEntries(
      Object.entries(request.headers)
        .filter(([name]) => name !== "Content-Length")
        .map(([name, value]) => [name, String(value)]),
    );
    const body = spoil(headers, request.body);
    const response = await fetch(subscription.endpoint, { method: "POST", headers, body });
    const path = new URL(subscription.endpoint).pathname;
    return { status: response.status, push: service.received().find((p) => p.path === path) };
  }

  it("accepts web-push's own request, which is what makes the other refusals meaningful", async () => {
    const { status, push } = await post(service.createSubscription());
    expect(status).toBe(201);
    expect(push).toMatchObject({ verified: true, plaintext: "hello", ttl: 60, urgency: "normal" });
  });

  it("refuses a payload encrypted for another subscription", async () => {
    const mine = service.createSubscription();
    const theirs = service.createSubscription();
    const { status, push } = await post({ ...theirs, endpoint: mine.endpoint });
    expect(status).toBe(400);
    expect(push).toMatchObject({ verified: false, reason: expect.stringContaining("does not decrypt") });
  });

  it("refuses a token signed by a key other than k=", async () => {
    const other = webpush.generateVAPIDKeys();
    const { status, push } = await post(service.createSubscription(), (headers, body) => {
      headers.Authorization = String(headers.Authorization).replace(/k=.*$/, `k=${other.publicKey}`);
      return body;
    });
    expect(status).toBe(400);
    expect(push).toMatchObject({ verified: false, reason: expect.stringContaining("signature") });
  });

  it("refuses a token for another audience", async () => {
    const subscription = service.createSubscription();
    const { Authorization } = webpush.getVapidHeaders(
      "https://push.elsewhere.test",
      SUBJECT,
      VAPID.publicKey,
      VAPID.privateKey,
      "aes128gcm",
    );
    const { status, push } = await post(subscription, (headers, body) => {
      headers.Authorization = Authorization;
      return body;
    });
    expect(status).toBe(400);
    expect(push).toMatchObject({ verified: false, reason: expect.stringContaining("aud") });
  });

  it("refuses a request without TTL or without a vapid Authorization", async () => {
    const noTtl = await post(service.createSubscription(), (headers, body) => {
      delete headers.TTL;
      return body;
    });
    const noAuth = await post(service.createSubscription(), (headers, body) => {
      delete headers.Authorization;
      return body;
    });
    expect([noTtl.status, noAuth.status]).toEqual([400, 400]);
    expect(noTtl.push).toMatchObject({ verified: false, reason: expect.stringContaining("TTL") });
    expect(noAuth.push).toMatchObject({ verified: false, reason: expect.stringContaining("vapid") });
  });

  it("refuses a tampered body", async () => {
    const { status, push } = await post(service.createSubscription(), (_headers, body) => {
      const tampered = Buffer.from(body);
      tampered[tampered.length - 1] = (tampered.at(-1) ?? 0) ^ 1;
      return tampered;
    });
    expect(status).toBe(400);
    expect(push).toMatchObject({ verified: false, reason: expect.stringContaining("does not decrypt") });
  });
});
