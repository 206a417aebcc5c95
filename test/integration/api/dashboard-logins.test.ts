import { request } from "node:http";
import type { AddressInfo } from "node:net";
import { serve } from "@hono/node-server";
import { afterAll, describe, expect, it } from "vitest";
import { createOpsApp } from "../../../src/api/ops-app.js";
import { MAX_FAILED_LOGINS } from "../../../src/observability/queue-board.js";
import { createHarness, type Harness } from "../../support/harness.js";

const basic = (user: string, password: string) =>
  `Basic ${Buffer.from(`${user}:${password}`).toString("base64")}`;
const PASSWORD = "board-password";

const running: Array<{ harness: Harness; server: ReturnType<typeof serve> }> = [];
afterAll(async () => {
  for (const { harness, server } of running) {
    await new Promise<void>((resolve) => server.close(() => resolve()));
    await harness.close();
  }
});

/**
 * The API's operator port (or, with `publicPort`, the public app without OPS_PORT, which then
 * serves the dashboard itself), over a real socket on loopback, with the dashboard on.
 */
async function dashboard(env: Record<string, string> = {}, { publicPort = false } = {}): Promise<number> {
  const harness = createHarness({
    ADMIN_USER: "ops",
    ADMIN_PASSWORD: PASSWORD,
    ...(publicPort ? {} : { OPS_PORT: "9465" }),
    ...env,
  });
  const app = publicPort ? harness.app : createOpsApp(harness.deps);
  const server = await new Promise<ReturnType<typeof serve>>((resolve) => {
    const started = serve({ fetch: app.fetch, port: 0, hostname: "127.0.0.1" }, () => resolve(started));
  });
  running.push({ harness, server });
  return (server.address() as AddressInfo).port;
}

interface Answer {
  status: number;
  retryAfter: string | undefined;
  body: string;
}

/**
 * One dashboard request as a client at `from` (another loopback address is another client as far
 * as the socket says), claiming `forwardedFor` when given.
 */
function login(
  port: number,
  password: string,
  options: { from?: string; forwardedFor?: string } = {},
): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const headers: Record<string, string> = { authorization: basic("ops", password) };
    if (options.forwardedFor) headers["x-forwarded-for"] = options.forwardedFor;
    const req = request(
      {
        host: "127.0.0.1",
        port,
        path: "/admin/queues/api/queues",
        headers,
        localAddress: options.from ?? "127.0.0.1",
        agent: false,
      },
      (res) => {
        let body = "";
        res.on("data", (chunk: Buffer) => {
          body += chunk.toString();
        });
        res.on("end", () =>
          resolve({ status: res.statusCode ?? 0, retryAfter: res.headers["retry-after"] as string, body }),
        );
      },
    );
    req.on("error", reject);
    req.end();
  });
}

async function failTenTimes(port: number, options: { from?: string; forwardedFor?: string }) {
  for (let i = 0; i < MAX_FAILED_LOGINS; i++) {
    expect((await login(port, `guess-${i}`, options)).status).toBe(401);
  }
}

function expectRefused(answer: Answer) {
  expect(answer.status).toBe(429);
  const seconds = Number(answer.retryAfter);
  expect(seconds).toBeGreaterThanOrEqual(1);
  expect(seconds).toBeLessThanOrEqual(60);
  expect(JSON.parse(answer.body)).toEqual({ error: `Too many failed logins; retry in ${seconds} s` });
}

describe("failed dashboard logins", () => {
  it("given ten wrong passwords from one client in a minute, its next login is refused with 429 and Retry-After, right password or not", async () => {
    const port = await dashboard();
    await failTenTimes(port, {});
    expectRefused(await login(port, PASSWORD));
    expectRefused(await login(port, "guess-11"));
  });

  it("given nine wrong passwords, the right one still logs in", async () => {
    const port = await dashboard();
    for (let i = 0; i < MAX_FAILED_LOGINS - 1; i++)
      expect((await login(port, `guess-${i}`)).status).toBe(401);
    expect((await login(port, PASSWORD)).status).toBe(200);
  });

  describe("without TRUST_PROXY, clients are told apart by the socket's address", () => {
    it("another address logs in while the guessing one is refused", async () => {
      const port = await dashboard();
      await failTenTimes(port, { from: "127.0.0.1" });
      expectRefused(await login(port, PASSWORD, { from: "127.0.0.1" }));
      expect((await login(port, PASSWORD, { from: "127.0.0.2" })).status).toBe(200);
    });

    it("a guesser cannot escape by claiming other addresses in X-Forwarded-For", async () => {
      const port = await dashboard();
      for (let i = 0; i < MAX_FAILED_LOGINS; i++) {
        expect((await login(port, `guess-${i}`, { forwardedFor: `198.51.100.${i + 1}` })).status).toBe(401);
      }
      expectRefused(await login(port, PASSWORD, { forwardedFor: "198.51.100.200" }));
    });
  });

  describe("with TRUST_PROXY and OPS_PORT, the operator port (never behind the proxy) ignores X-Forwarded-For", () => {
    it("a guesser rotating X-Forwarded-For is refused after ten failures", async () => {
      const port = await dashboard({ TRUST_PROXY: "true" });
      for (let i = 0; i < MAX_FAILED_LOGINS; i++) {
        expect((await login(port, `guess-${i}`, { forwardedFor: `198.51.100.${i + 1}` })).status).toBe(401);
      }
      expectRefused(await login(port, PASSWORD, { forwardedFor: "198.51.100.200" }));
    });
  });

  describe("with TRUST_PROXY, the public port tells clients apart by the address our proxy appended", () => {
    it("the operator behind the same proxy logs in while the guessing client is refused", async () => {
      const port = await dashboard({ TRUST_PROXY: "true" }, { publicPort: true });
      // Every request comes from the proxy's one socket address; X-Forwarded-For names the client.
      await failTenTimes(port, { forwardedFor: "203.0.113.66" });
      expectRefused(await login(port, PASSWORD, { forwardedFor: "203.0.113.66" }));
      expect((await login(port, PASSWORD, { forwardedFor: "203.0.113.7" })).status).toBe(200);
    });

    it("a guesser cannot escape by putting other addresses before the proxy's", async () => {
      const port = await dashboard({ TRUST_PROXY: "true" }, { publicPort: true });
      for (let i = 0; i < MAX_FAILED_LOGINS; i++) {
        const forged = `198.51.100.${i + 1}, 203.0.113.66`;
        expect((await login(port, `guess-${i}`, { forwardedFor: forged })).status).toBe(401);
      }
      expectRefused(await login(port, PASSWORD, { forwardedFor: "10.9.9.9, 203.0.113.66" }));
    });

    it("a guesser cannot escape by rotating the addresses of its IPv6 /64", async () => {
      const port = await dashboard({ TRUST_PROXY: "true" }, { publicPort: true });
      for (let i = 0; i < MAX_FAILED_LOGINS; i++) {
        expect((await login(port, `guess-${i}`, { forwardedFor: `2001:db8:66:1::${i + 1}` })).status).toBe(
          401,
        );
      }
      expectRefused(await login(port, PASSWORD, { forwardedFor: "2001:db8:66:1:ffff::1" }));
      expect((await login(port, PASSWORD, { forwardedFor: "2001:db8:66:2::1" })).status).toBe(200);
    });
  });
});
