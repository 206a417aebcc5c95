import { type AddressInfo, createServer, type Socket } from "node:net";
import { afterAll, describe, expect, it } from "vitest";
import { createDatabase } from "../../../db/client.js";
import { createApp } from "../../../src/api/app.js";
import { createHarness, onboard, sendSms } from "../../support/harness.js";

const h = createHarness();
const unreachable = createDatabase({
  url: "postgres://postgres@127.0.0.1:1/nowhere",
  poolSize: 1,
  connectTimeoutSeconds: 1,
});
afterAll(async () => {
  await h.close();
  await unreachable.sql.end({ timeout: 1 });
});

describe("errors outside any one route", () => {
  it("answers an unknown route with a JSON 404", async () => {
    const response = await h.app.request("/api/v1/nothing-here");
    expect(response.status).toBe(404);
    expect(await response.json()).toEqual({ error: "No route for GET /api/v1/nothing-here" });
  });

  it("answers a known path with the wrong method with a JSON 404", async () => {
    const response = await h.app.request("/api/v1/notifications/sms");
    expect(response.status).toBe(404);
    expect(Object.keys((await response.json()) as object)).toEqual(["error"]);
  });

  it("answers 503 with Retry-After when Postgres is unreachable", async () => {
    const app = createApp(h.depsOn(unreachable));
    const response = await sendSms({ ...h, app }, `ntf_${"B".repeat(43)}`, {
      payload: { to: "+14155550100", body: "x" },
    });
    expect(response.status).toBe(503);
    expect(response.headers.get("retry-after")).toBe("5");
    expect(await response.json()).toEqual({ error: "Service temporarily unavailable; retry shortly" });
  });

  it("answers an unexpected failure with a generic 500 and no internals", async () => {
    const org = await onboard(h);
    const app = createApp({
      ...h.deps,
      newId: () => {
        throw new Error("secret internal detail");
      },
    });
    const response = await sendSms({ ...h, app }, org.apiKey, { payload: { to: "+14155550100", body: "x" } });
    expect(response.status).toBe(500);
    const text = await response.text();
    expect(JSON.parse(text)).toEqual({ error: "Internal server error" });
    expect(text).not.toContain("secret");
  });

  it("echoes a caller's X-Request-Id and makes one up otherwise", async () => {
    const given = await h.app.request("/healthz", { headers: { "x-request-id": "req-123" } });
    expect(given.headers.get("x-request-id")).toBe("req-123");
    const made = await h.app.request("/healthz");
    expect(made.headers.get("x-request-id")).toMatch(/.{8,}/);
  });
});

describe("a request that hangs", () => {
  it("gets a 503 with Retry-After once REQUEST_TIMEOUT_MS has passed", async () => {
    // A database that accepts connections and never answers, as behind a network partition.
    const sockets = new Set<Socket>();
    const blackhole = createServer((socket) => sockets.add(socket));
    await new Promise<void>((resolve) => blackhole.listen(0, "127.0.0.1", resolve));
    const port = (blackhole.address() as AddressInfo).port;
    const frozen = createDatabase({
      url: `postgres://postgres@127.0.0.1:${port}/frozen`,
      poolSize: 1,
      connectTimeoutSeconds: 60,
    });
    const slow = createHarness({ REQUEST_TIMEOUT_MS: "200" });
    try {
      const app = createApp(slow.depsOn(frozen));
      const started = Date.now();
      const response = await sendSms({ ...slow, app }, `ntf_${"C".repeat(43)}`, {
        payload: { to: "+14155550100", body: "x" },
      });
      expect(response.status).toBe(503);
      expect(response.headers.get("retry-after")).toBe("5");
      expect(await response.json()).toEqual({ error: "Service temporarily unavailable; retry shortly" });
      expect(Date.now() - started).toBeLessThan(2000);
    } finally {
      for (const socket of sockets) socket.destroy();
      blackhole.close();
      await frozen.sql.end({ timeout: 0 }).catch(() => {});
      await slow.close();
    }
  });
});
