import type { AddressInfo } from "node:net";
import { serve } from "@hono/node-server";
import { Hono } from "hono";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { clientIpResolver } from "../../../src/http/client-ip.js";

/** A server that answers with the address each resolver sees, over a real socket. */
function ipEcho() {
  const app = new Hono();
  const direct = clientIpResolver(false);
  const proxied = clientIpResolver(true);
  app.get("/direct", (c) => c.text(direct(c)));
  app.get("/proxied", (c) => c.text(proxied(c)));
  return app;
}

const app = ipEcho();
let server: ReturnType<typeof serve>;
let baseUrl: string;

beforeAll(async () => {
  await new Promise<void>((resolve) => {
    server = serve({ fetch: app.fetch, port: 0, hostname: "127.0.0.1" }, () => resolve());
  });
  baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

async function seenAddress(path: string, headers: Record<string, string> = {}): Promise<string> {
  const res = await fetch(`${baseUrl}${path}`, { headers });
  return res.text();
}

describe("client IP", () => {
  it("is the socket address when proxies are not trusted, whatever X-Forwarded-For claims", async () => {
    expect(await seenAddress("/direct", { "x-forwarded-for": "203.0.113.9" })).toBe("127.0.0.1");
  });

  it("is the address our proxy appended (the last one) when proxies are trusted", async () => {
    expect(await seenAddress("/proxied", { "x-forwarded-for": " 6.6.6.6 , 203.0.113.9 " })).toBe(
      "203.0.113.9",
    );
  });

  it("falls back to the socket address when a trusted proxy sent no X-Forwarded-For", async () => {
    expect(await seenAddress("/proxied")).toBe("127.0.0.1");
  });

  it('is "unknown" when there is no socket, as with app.request in tests', async () => {
    const res = await app.request("/direct");
    expect(await res.text()).toBe("unknown");
  });
});
