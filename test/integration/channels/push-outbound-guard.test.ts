import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import webpush from "web-push";
import type { PushMessage } from "../../../src/channels/push/providers/provider.js";
import {
  WebPushProvider,
  type WebPushProviderOptions,
} from "../../../src/channels/push/providers/webpush.js";
import type { Resolve } from "../../../src/runtime/outbound/outbound-fetch.js";
import { startPushService } from "../../support/push-service.js";

/**
 * The push provider's outbound guard (issue 15): an endpoint whose address is not public is
 * never connected to, however it is written or resolved, unless OUTBOUND_ALLOWED_NETWORKS allows
 * it; no redirect is followed; the allow-list of hosts is checked again at send time. The servers
 * here stand for internal services (a metadata endpoint, an admin port): each counts what
 * reaches it, and the refused attempts must leave it at zero.
 */

const VAPID = webpush.generateVAPIDKeys();

/** An internal HTTP service on `host` that answers `respond` (default 201) and counts requests. */
interface Internal {
  port: number;
  hits: string[];
  close(): Promise<void>;
}

async function internalService(
  host: string,
  respond: (req: IncomingMessage, res: ServerResponse) => void = (_req, res) => {
    res.writeHead(201, { connection: "close" }).end("iam-secret-credentials");
  },
): Promise<Internal> {
  const hits: string[] = [];
  const server: Server = createServer((req, res) => {
    hits.push(req.url ?? "");
    req.resume();
    req.on("end", () => respond(req, res));
  });
  await new Promise<void>((resolve) => server.listen(0, host, resolve));
  return {
    port: (server.address() as AddressInfo).port,
    hits,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

const pushService = await startPushService();
const subscription = pushService.createSubscription();

function message(endpoint: string, attempt = 1): PushMessage {
  return {
    messageId: "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b",
    subscription: { ...subscription, endpoint },
    payload: JSON.stringify({ title: "t", body: "b" }),
    ttlSeconds: 60,
    urgency: "normal",
    attempt,
  };
}

/** Every host allowed (the address checks are what is tested), no network besides public ones. */
function provider(overrides: Partial<WebPushProviderOptions> = {}): WebPushProvider {
  return new WebPushProvider({
    vapidPublicKey: VAPID.publicKey,
    vapidPrivateKey: VAPID.privateKey,
    vapidSubject: "mailto:ops@notify.test",
    timeoutMs: 2000,
    allowedHosts: null,
    ...overrides,
  });
}

const refused = {
  ok: false,
  provider: "webpush",
  error: {
    class: "rejected",
    code: "address_not_allowed",
    message: "Not sent: the address of the push service is not allowed",
  },
  detail: expect.stringContaining("ERR_OUTBOUND_ADDRESS_REFUSED"),
};

let v4: Internal;
let v6: Internal;
beforeAll(async () => {
  v4 = await internalService("127.0.0.1");
  v6 = await internalService("::1");
});
afterAll(async () => {
  await Promise.all([v4.close(), v6.close(), pushService.close()]);
});

describe("the push provider connects to no internal address", () => {
  it.each([
    ["127.0.0.1", () => `http://127.0.0.1:${v4.port}/latest/meta-data/iam`],
    ["::1", () => `http://[::1]:${v6.port}/latest/meta-data/iam`],
    ["localhost", () => `http://localhost:${v4.port}/latest/meta-data/iam`],
    ["an IPv4-mapped IPv6 literal", () => `http://[::ffff:127.0.0.1]:${v4.port}/iam`],
    ["an IPv4-mapped IPv6 literal in hex", () => `http://[::ffff:7f00:1]:${v4.port}/iam`],
    ["a decimal literal", () => `http://2130706433:${v4.port}/iam`],
    ["a hex literal", () => `http://0x7f000001:${v4.port}/iam`],
    ["an octal literal", () => `http://0177.0.0.01:${v4.port}/iam`],
    ["a shorthand literal", () => `http://127.1:${v4.port}/iam`],
    ["https to loopback", () => `https://127.0.0.1:${v4.port}/iam`],
  ])(
    "%s: refused before connecting; the event would carry a class and a code only",
    async (_case, endpoint) => {
      const before = v4.hits.length + v6.hits.length;
      const outcome = await provider().send(message(endpoint()));
      expect(outcome).toStrictEqual(refused);
      if (outcome.ok) throw new Error("unreachable");
      expect(outcome.error.message).not.toMatch(/127|::1|localhost|\d{4,5}/);
      expect(v4.hits.length + v6.hits.length).toBe(before);
    },
  );

  it.each([
    "http://169.254.169.254/latest/meta-data/iam/security-credentials/",
    "http://[fd00:ec2::254]/latest/meta-data/",
    "http://10.0.0.1/",
    "http://100.100.100.200/latest/meta-data/",
    "http://[fe80::1]/",
    "http://0.0.0.0/",
    "http://[::]/",
  ])("%s (metadata, private, link-local, CGNAT, unspecified) is refused", async (endpoint) => {
    expect(await provider().send(message(endpoint))).toStrictEqual(refused);
  });

  it("a host allowed by OUTBOUND_ALLOWED_NETWORKS is reached, in IPv4 and IPv6", async () => {
    const allowed = provider({ allowedNetworks: ["127.0.0.1", "::1"] });
    const before = [v4.hits.length, v6.hits.length];
    expect(await allowed.send(message(`http://127.0.0.1:${v4.port}/push/a`))).toMatchObject({ ok: true });
    expect(await allowed.send(message(`http://[::1]:${v6.port}/push/b`))).toMatchObject({ ok: true });
    expect([v4.hits.length, v6.hits.length]).toEqual([(before[0] ?? 0) + 1, (before[1] ?? 0) + 1]);
    await allowed.close();
  });

  it("sends with the undici package's own fetch, not Node's built-in one (whose bundled undici, 7 from Node 24, cannot take our Agent)", async () => {
    const allowed = provider({ allowedNetworks: ["127.0.0.1"] });
    vi.stubGlobal("fetch", () => Promise.reject(new Error("Node's built-in fetch was used")));
    try {
      const before = v4.hits.length;
      expect(await allowed.send(message(`http://127.0.0.1:${v4.port}/push/own-fetch`))).toMatchObject({
        ok: true,
      });
      expect(v4.hits.length).toBe(before + 1);
    } finally {
      vi.unstubAllGlobals();
      await allowed.close();
    }
  });

  it("a name that resolved to an allowed address, then to a private one, is refused when it does (DNS rebinding)", async () => {
    // 127.0.0.1 plays the public address here (the operator allows it); 10.0.0.1, the internal one.
    const answers = ["127.0.0.1", "10.0.0.1"];
    const asked: string[] = [];
    const resolve: Resolve = async (hostname) => {
      asked.push(hostname);
      const address = answers[Math.min(asked.length - 1, answers.length - 1)] ?? "";
      return [{ address, family: 4 }];
    };
    const rebinding = provider({ allowedNetworks: ["127.0.0.1"], resolve });
    const endpoint = `http://push.rebind.test:${v4.port}/push/c`;
    const before = v4.hits.length;
    // The internal service closes each connection, so the second send connects (and resolves) again.
    expect(await rebinding.send(message(endpoint, 1))).toMatchObject({ ok: true });
    expect(await rebinding.send(message(endpoint, 2))).toStrictEqual(refused);
    expect(asked).toEqual(["push.rebind.test", "push.rebind.test"]);
    expect(v4.hits.length).toBe(before + 1);
    await rebinding.close();
  });

  it("a name with one internal address among public ones is refused", async () => {
    const resolve: Resolve = async () => [
      { address: "127.0.0.1", family: 4 },
      { address: "169.254.169.254", family: 4 },
    ];
    const mixed = provider({ allowedNetworks: ["127.0.0.1"], resolve });
    const before = v4.hits.length;
    expect(await mixed.send(message(`http://mixed.test:${v4.port}/push/d`))).toStrictEqual(refused);
    expect(v4.hits.length).toBe(before);
  });

  it("a redirect to an internal address is not followed, and is a failure", async () => {
    const redirecting = await internalService("127.0.0.1", (_req, res) => {
      res.writeHead(302, { location: `http://[::1]:${v6.port}/latest/meta-data/iam` }).end("moved");
    });
    // Both are allowed, so only not following the redirect keeps the request off [::1].
    const p = provider({ allowedNetworks: ["127.0.0.1", "::1"] });
    const before = v6.hits.length;
    const outcome = await p.send(message(`http://127.0.0.1:${redirecting.port}/push/e`));
    expect(outcome).toStrictEqual({
      ok: false,
      provider: "webpush",
      error: { class: "permanent", code: "http_302", message: "The push service answered HTTP 302" },
      detail: expect.stringContaining("HTTP 302"),
    });
    expect(redirecting.hits).toHaveLength(1);
    expect(v6.hits.length).toBe(before);
    await Promise.all([p.close(), redirecting.close()]);
  });

  it("the allow-list of hosts is checked again at send time", async () => {
    const p = provider({ allowedHosts: ["fcm.googleapis.com"], allowedNetworks: ["127.0.0.1"] });
    const before = v4.hits.length;
    expect(await p.send(message(`http://127.0.0.1:${v4.port}/push/f`))).toStrictEqual({
      ok: false,
      provider: "webpush",
      error: {
        class: "rejected",
        code: "endpoint_not_allowed",
        message: "Not sent: the subscription's push service is not one PUSH_ENDPOINT_HOSTS allows",
      },
      detail: `endpoint host 127.0.0.1:${v4.port} is not in PUSH_ENDPOINT_HOSTS`,
    });
    expect(v4.hits.length).toBe(before);
  });

  it("the provider as the worker makes it keeps to the browsers' push services", async () => {
    const { createPushProvider } = await import("../../../src/channels/push/providers/index.js");
    const { loadConfig } = await import("../../../src/runtime/config.js");
    const config = loadConfig({
      NODE_ENV: "development",
      PUSH_PROVIDER: "webpush",
      VAPID_PUBLIC_KEY: VAPID.publicKey,
      VAPID_PRIVATE_KEY: VAPID.privateKey,
    });
    const p = createPushProvider(config);
    expect(await p.send(message(`http://127.0.0.1:${v4.port}/push/g`))).toMatchObject({
      ok: false,
      error: { code: "endpoint_not_allowed" },
    });
    // Allowed by name, the address is still checked.
    const named = createPushProvider({ ...config, PUSH_ENDPOINT_HOSTS: [`127.0.0.1:${v4.port}`] });
    expect(await named.send(message(`http://127.0.0.1:${v4.port}/push/h`))).toStrictEqual(refused);
    await Promise.all([p.close?.(), named.close?.()]);
  });
});
