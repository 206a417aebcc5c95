import type { MiddlewareHandler } from "hono";
import { bodyLimit } from "hono/body-limit";
import { incomingOf, requestHeader } from "./node-request.js";

type BodyLimitOptions = Parameters<typeof bodyLimit>[0];

/**
 * hono's `bodyLimit`, minus its cost on the common path. hono's reads `c.req.raw.body`, which
 * makes @hono/node-server build a full WHATWG Request (a ReadableStream, an AbortSignal) for
 * every request, GETs included, which costs more CPU than the rest of a read. Under node-server a request without a
 * body, or with a Content-Length and no Transfer-Encoding, is decided from its headers alone
 * (Node's parser holds the body to its Content-Length); a chunked body, or any request outside
 * node-server, goes through hono's `bodyLimit`, which counts the bytes as they arrive.
 */
export function headerBodyLimit(options: BodyLimitOptions): MiddlewareHandler {
  const counting = bodyLimit(options);
  return async function limitBody(c, next) {
    // Outside node-server (tests' app.request) the headers need not describe the body: count it.
    if (!incomingOf(c) || requestHeader(c, "transfer-encoding") !== undefined) return counting(c, next);
    const length = requestHeader(c, "content-length");
    // HTTP/1.1: no Content-Length and no Transfer-Encoding means no body.
    if (length !== undefined && Number.parseInt(length, 10) > options.maxSize) {
      return options.onError ? options.onError(c) : counting(c, next);
    }
    await next();
  };
}
