import type { IncomingMessage } from "node:http";
import type { Context, MiddlewareHandler } from "hono";
import { bodyLimit } from "hono/body-limit";

type BodyLimitOptions = Parameters<typeof bodyLimit>[0];

/**
 * hono's `bodyLimit`, minus its cost on the common path. hono's reads `c.req.raw.body`, which
 * makes @hono/node-server build a full WHATWG Request (a ReadableStream, an AbortSignal) for
 * every request, GETs included: about 100 µs of CPU each. Under node-server a request without a
 * body, or with a Content-Length and no Transfer-Encoding, is decided from its headers alone
 * (Node's parser holds the body to its Content-Length); a chunked body, or any request outside
 * node-server, goes through hono's `bodyLimit`, which counts the bytes as they arrive.
 */
export function headerBodyLimit(options: BodyLimitOptions): MiddlewareHandler {
  const counting = bodyLimit(options);
  return async function limitBody(c, next) {
    // Outside node-server (tests' app.request) the headers need not describe the body: count it.
    if (!incomingOf(c) || c.req.header("transfer-encoding") !== undefined) return counting(c, next);
    const length = c.req.header("content-length");
    // HTTP/1.1: no Content-Length and no Transfer-Encoding means no body.
    if (length !== undefined && Number.parseInt(length, 10) > options.maxSize) {
      return options.onError ? options.onError(c) : counting(c, next);
    }
    await next();
  };
}

/**
 * The request body as text. Under @hono/node-server it is read straight from Node's request, so
 * no WHATWG Request or stream is built for it; anywhere else (tests' `app.request`, or a body
 * that middleware already consumed) through `c.req.text()`.
 */
export function readBodyText(c: Context): Promise<string> {
  const incoming = incomingOf(c);
  if (!incoming || incoming.readableDidRead || incoming.readableEnded) return c.req.text();
  return new Promise<string>((resolve, reject) => {
    const chunks: Buffer[] = [];
    incoming.on("data", (chunk: Buffer) => chunks.push(chunk));
    incoming.once("end", () =>
      resolve(
        chunks.length === 1 ? (chunks[0] as Buffer).toString("utf8") : Buffer.concat(chunks).toString("utf8"),
      ),
    );
    incoming.once("error", reject);
  });
}

/** Node's request, when the app runs under @hono/node-server. */
function incomingOf(c: Context): IncomingMessage | undefined {
  return (c.env as { incoming?: IncomingMessage } | undefined)?.incoming;
}
