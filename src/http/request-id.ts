import { randomUUID } from "node:crypto";
import type { MiddlewareHandler } from "hono";
import { requestHeader, setResponseHeader } from "./node-request.js";

const USABLE_ID = /^[\w\-=]{1,200}$/;

/**
 * Every request gets an id, logged with it and answered in `X-Request-Id`: the caller's own when
 * it sends a usable one (1-200 letters, digits, `_`, `-`, `=`), a new UUID otherwise. Hono's
 * `requestId` does the same through `c.req.header()` and `c.header()`, whose WHATWG `Headers`
 * cost more than the rest of the request's middleware together (see node-request.ts).
 */
export function requestId(): MiddlewareHandler<{ Variables: { requestId: string } }> {
  return async function assignRequestId(c, next) {
    const given = requestHeader(c, "x-request-id");
    const id = given !== undefined && USABLE_ID.test(given) ? given : randomUUID();
    c.set("requestId", id);
    setResponseHeader(c, "X-Request-Id", id);
    await next();
  };
}
