import type { MiddlewareHandler } from "hono";
import { setResponseHeader } from "./node-request.js";

/**
 * `Cache-Control: no-store` on every answer of the routes it guards: they carry API keys or
 * message content (records, histories, templates), which no browser or proxy cache may keep.
 */
export function noStore(): MiddlewareHandler {
  return async function forbidCaching(c, next) {
    setResponseHeader(c, "Cache-Control", "no-store");
    await next();
  };
}

/**
 * The headers of the HTML pages (`/docs`, `/admin/queues`): no page may frame them (clickjacking),
 * no plugin may load, the browser sniffs no type, and no referrer leaves. The scripts the pages
 * need are their own, so no script rule is set, and Bull Board's page needs its `<base>`.
 */
export const PAGE_HEADERS: Readonly<Record<string, string>> = {
  "Content-Security-Policy": "frame-ancestors 'none'; object-src 'none'",
  "X-Frame-Options": "DENY",
  "X-Content-Type-Options": "nosniff",
  "Referrer-Policy": "no-referrer",
};

/** A copy of a page's response with {@link PAGE_HEADERS} (a fetched Response's own may not change). */
export function securePage(response: Response): Response {
  const headers = new Headers(response.headers);
  for (const [name, value] of Object.entries(PAGE_HEADERS)) headers.set(name, value);
  return new Response(response.body, { status: response.status, statusText: response.statusText, headers });
}
