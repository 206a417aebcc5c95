import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  createOutboundAgent,
  isOutboundAddressError,
  OutboundTimeoutError,
  outboundPost,
  type Resolve,
} from "../../../src/runtime/outbound/outbound-fetch.js";

/**
 * `outboundPost` (the status webhooks' POST, decision 0036): undici's `dispatch` through the
 * guarded Agent. The address check happens at connect time whatever resolves the name, a 3xx is
 * the answer (never followed), the deadline covers the whole request, an abort ends it, and the
 * answer's body is dropped with the connection kept for the next request.
 */

interface Hit {
  path: string;
  body: string;
  socket: number;
}

const hits: Hit[] = [];
const hanging: ServerResponse[] = [];
const sockets = new WeakMap<object, number>();
let nextSocket = 0;

const server: Server = createServer((request: IncomingMessage, response: ServerResponse) => {
  const chunks: Buffer[] = [];
  request.on("data", (chunk: Buffer) => chunks.push(chunk));
  request.on("end", () => {
    if (!sockets.has(request.socket)) sockets.set(request.socket, nextSocket++);
    const path = request.url ?? "";
    hits.push({ path, body: Buffer.concat(chunks).toString(), socket: sockets.get(request.socket) ?? -1 });
    if (path === "/redirect") return void response.writeHead(302, { location: "/elsewhere" }).end();
    if (path === "/busy") return void response.writeHead(503, { "retry-after": "120" }).end("later");
    if (path === "/hang") return void hanging.push(response);
    if (path === "/long") return void response.writeHead(200).end("x".repeat(256 * 1024));
    response.writeHead(204).end();
  });
});
let port = 0;

/** Every name resolves to 127.0.0.1 (a name that "rebinds" to loopback). */
const loopback: Resolve = async () => [{ address: "127.0.0.1", family: 4 }];

beforeAll(async () => {
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  port = (server.address() as AddressInfo).port;
});

afterAll(async () => {
  for (const response of hanging) response.destroy();
  server.closeAllConnections();
  await new Promise<void>((resolve) => server.close(() => resolve()));
});

const allowed = () =>
  outboundPost(createOutboundAgent({ allowedNetworks: ["127.0.0.0/8"], resolve: loopback }));
const request = (body = "{}", timeoutMs = 5_000) => ({
  headers: { "content-type": "application/json", "webhook-id": "evt_1" },
  body,
  timeoutMs,
});

describe("outboundPost", () => {
  it("refuses a name that resolves to a private address, and an IP literal, without connecting", async () => {
    const post = outboundPost(createOutboundAgent({ allowedNetworks: [], resolve: loopback }));
    const before = hits.length;
    const byName = await post(`http://hooks.example.com:${port}/a`, request()).catch((error) => error);
    const byLiteral = await post(`http://127.0.0.1:${port}/a`, request()).catch((error) => error);
    expect(isOutboundAddressError(byName)).toBe(true);
    expect(isOutboundAddressError(byLiteral)).toBe(true);
    expect(hits.length).toBe(before);
  });

  it("POSTs the body and headers, answers the status and Retry-After, and does not follow a redirect", async () => {
    const post = allowed();
    expect(await post(`http://hooks.example.com:${port}/ok?x=1`, request('{"a":1}'))).toEqual({
      status: 204,
      retryAfter: null,
    });
    expect(hits.at(-1)).toMatchObject({ path: "/ok?x=1", body: '{"a":1}' });
    expect(await post(`http://hooks.example.com:${port}/busy`, request())).toEqual({
      status: 503,
      retryAfter: "120",
    });
    const before = hits.length;
    expect(await post(`http://hooks.example.com:${port}/redirect`, request())).toEqual({
      status: 302,
      retryAfter: null,
    });
    expect(hits.slice(before).map((hit) => hit.path)).toEqual(["/redirect"]);
  });

  it("keeps the connection for the next request, and drops a long answer's body", async () => {
    const post = allowed();
    const before = hits.length;
    for (let i = 0; i < 10; i++) {
      expect((await post(`http://hooks.example.com:${port}/one`, request())).status).toBe(204);
    }
    // Undici may open a second connection while the first is being released; not one per request.
    expect(new Set(hits.slice(before).map((hit) => hit.socket)).size).toBeLessThanOrEqual(2);
    expect((await post(`http://hooks.example.com:${port}/long`, request())).status).toBe(200);
    expect((await post(`http://hooks.example.com:${port}/after`, request())).status).toBe(204);
  });

  it("gives up at the deadline, and when aborted", async () => {
    const post = allowed();
    const started = performance.now();
    const timedOut = await post(`http://hooks.example.com:${port}/hang`, request("{}", 300)).catch(
      (error) => error,
    );
    expect(timedOut).toBeInstanceOf(OutboundTimeoutError);
    expect(timedOut.name).toBe("TimeoutError");
    expect(performance.now() - started).toBeGreaterThanOrEqual(250);

    const aborts = new Set<(reason: Error) => void>();
    const aborted = post(`http://hooks.example.com:${port}/hang`, {
      ...request("{}", 60_000),
      cancellable: (abort) => {
        aborts.add(abort);
        return () => aborts.delete(abort);
      },
    }).catch((error) => error);
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(aborts.size).toBe(1);
    for (const abort of aborts) abort(new DOMException("stopped", "AbortError"));
    expect((await aborted).name).toBe("AbortError");
    expect(aborts.size).toBe(0);
  });
});
