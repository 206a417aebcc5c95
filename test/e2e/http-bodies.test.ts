import { randomUUID } from "node:crypto";
import { request } from "node:http";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { freePort, procfile, type RunningProcess, runProcess, waitForHttp } from "../support/processes.js";

/**
 * Request bodies and headers as Node's HTTP server really receives them (Content-Length or
 * chunked), which in-process `app.request` cannot show: the web process reads and limits bodies
 * without building a WHATWG Request (src/http/body-limit.ts) and reads headers from Node's own
 * parse (src/http/node-request.ts).
 */
let web: RunningProcess | undefined;
let port = 0;
let apiKey = "";

beforeAll(async () => {
  port = await freePort();
  web = runProcess(procfile().web ?? "missing-web", {
    DATABASE_URL: inject("databaseUrl"),
    REDIS_URL: process.env.REDIS_URL ?? "redis://127.0.0.1:6379",
    PORT: String(port),
    QUEUE_PREFIX: `e2e-${randomUUID().slice(0, 8)}`,
    LOG_LEVEL: "warn",
  });
  await waitForHttp(`http://127.0.0.1:${port}/healthz`);
  const onboarded = await fetch(
    `http://127.0.0.1:${port}/api/v1/onboarding/organizations/bodies-${randomUUID().slice(0, 8)}`,
    {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ organizations: [{ name: "Bodies", active: true }] }),
    },
  );
  apiKey =
    ((await onboarded.json()) as { organizations: Array<{ apiKey: string }> }).organizations[0]?.apiKey ?? "";
}, 30_000);

afterAll(async () => {
  await web?.stop("SIGKILL");
});

/** POSTs an SMS body, either with a Content-Length or chunked in pieces. */
function post(body: string, mode: "content-length" | "chunked"): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: "127.0.0.1",
        port,
        method: "POST",
        path: "/api/v1/notifications/sms",
        headers: {
          "content-type": "application/json",
          "x-api-key": apiKey,
          ...(mode === "content-length" ? { "content-length": Buffer.byteLength(body) } : {}),
        },
      },
      (res) => {
        let text = "";
        res.on("data", (chunk: Buffer) => {
          text += chunk.toString();
        });
        res.on("end", () => resolve({ status: res.statusCode ?? 0, body: text }));
      },
    );
    req.on("error", reject);
    if (mode === "chunked") {
      const third = Math.ceil(body.length / 3);
      for (let i = 0; i < body.length; i += third) req.write(body.slice(i, i + third));
    } else {
      req.write(body);
    }
    req.end();
  });
}

const sms = (text: string) => JSON.stringify({ payload: { to: "+14155550100", body: text, sender: "ACME" } });

describe("request bodies in the web process", () => {
  it.each(["content-length", "chunked"] as const)("accepts a JSON body sent with %s", async (mode) => {
    const response = await post(sms(`hello, ${mode} ünïcode`), mode);
    expect(response.status).toBe(202);
    const { request_id } = JSON.parse(response.body) as { request_id: string };
    const record = await fetch(`http://127.0.0.1:${port}/api/v1/messages/${request_id}`, {
      headers: { "x-api-key": apiKey },
    });
    expect(((await record.json()) as { payload: { message: string } }).payload.message).toBe(
      `hello, ${mode} ünïcode`,
    );
  });

  it.each(["content-length", "chunked"] as const)(
    "answers 413 for a body over 64 KiB sent with %s",
    async (mode) => {
      const response = await post(sms("x".repeat(70_000)), mode);
      expect(response.status).toBe(413);
      expect(JSON.parse(response.body)).toEqual({ error: expect.stringMatching(/64 KiB/) });
    },
  );

  it("answers 400 for malformed JSON", async () => {
    expect((await post('{"payload": ', "content-length")).status).toBe(400);
  });
});

describe("request headers in the web process", () => {
  const send = (headers: Record<string, string>, body = sms("headers")) =>
    fetch(`http://127.0.0.1:${port}/api/v1/notifications/sms`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-api-key": apiKey, ...headers },
      body,
    });

  it("echoes a usable X-Request-Id, and makes one up for a missing or unusable one, errors included", async () => {
    expect((await send({ "x-request-id": "trace-42=a_b" })).headers.get("x-request-id")).toBe("trace-42=a_b");
    const uuid = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
    expect((await send({})).headers.get("x-request-id")).toMatch(uuid);
    expect((await send({ "x-request-id": "has space" })).headers.get("x-request-id")).toMatch(uuid);
    expect((await send({ "x-request-id": "x".repeat(201) })).headers.get("x-request-id")).toMatch(uuid);
    const refused = await send({ "x-api-key": "nope", "x-request-id": "trace-401" });
    expect(refused.status).toBe(401);
    expect(refused.headers.get("x-request-id")).toBe("trace-401");
  });

  it("replays a repeated Idempotency-Key and refuses a malformed one", async () => {
    const key = `k-${randomUUID()}`;
    const first = await send({ "idempotency-key": key });
    const again = await send({ "idempotency-key": key });
    expect([first.status, again.status]).toEqual([202, 202]);
    expect(again.headers.get("idempotent-replayed")).toBe("true");
    expect(((await again.json()) as { request_id: string }).request_id).toBe(
      ((await first.json()) as { request_id: string }).request_id,
    );
    const bad = await send({ "idempotency-key": "k".repeat(256) });
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as { error: string }).error).toMatch(/^Idempotency-Key: /);
  });

  it("reads Content-Type and x-api-key as sent: parameters allowed, another type 415, no key 401", async () => {
    expect((await send({ "content-type": "application/json; charset=utf-8" })).status).toBe(202);
    expect((await send({ "content-type": "text/plain" })).status).toBe(415);
    const noKey = await fetch(`http://127.0.0.1:${port}/api/v1/notifications/sms`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: sms("no key"),
    });
    expect(noKey.status).toBe(401);
  });
});
