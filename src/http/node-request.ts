import type { IncomingMessage, ServerResponse } from "node:http";
import type { Context } from "hono";

/**
 * Reading the request through Node's own objects where @hono/node-server gives them. Hono's
 * `c.req.header()` makes node-server build a WHATWG `Headers` of every header for the request
 * (and `c.header()` another for the response), which costs more than everything else a header
 * read does; Node has already parsed them. Outside node-server (tests' `app.request`) these fall
 * back to Hono's own calls.
 */

/** A request header by its lower-case name, as `c.req.header(name)` would give it. */
export function requestHeader(c: Context, name: string): string | undefined {
  const incoming = incomingOf(c);
  if (!incoming) return c.req.header(name);
  const value = incoming.headers[name];
  return Array.isArray(value) ? value.join(", ") : value;
}

/** Sets a header of the response to come, whatever the handler answers with. */
export function setResponseHeader(c: Context, name: string, value: string): void {
  const outgoing = (c.env as { outgoing?: ServerResponse } | undefined)?.outgoing;
  // Node merges what was set here with the headers node-server writes with the response.
  if (outgoing && !outgoing.headersSent) outgoing.setHeader(name, value);
  else c.header(name, value);
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
export function incomingOf(c: Context): IncomingMessage | undefined {
  return (c.env as { incoming?: IncomingMessage } | undefined)?.incoming;
}
