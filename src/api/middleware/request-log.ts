import type { MiddlewareHandler } from "hono";
import { routePath } from "hono/route";
import type { Metrics } from "../../observability/metrics.js";
import type { Logger } from "../../runtime/logger.js";

/**
 * One structured log line and one histogram sample per request, labelled by the route pattern
 * (never the raw path, which holds ids). Bodies, keys and tokens are never logged.
 */
export function requestLog(logger: Logger, metrics?: Metrics): MiddlewareHandler {
  return async function logRequest(c, next) {
    const started = performance.now();
    await next();
    const seconds = (performance.now() - started) / 1000;
    const route = c.res.status === 404 && !c.req.routePath ? "unmatched" : routePath(c, -1);
    metrics?.observeRequest(c.req.method, route, c.res.status, seconds);
    const entry = {
      requestId: c.get("requestId"),
      method: c.req.method,
      route,
      status: c.res.status,
      durationMs: Math.round(seconds * 10_000) / 10,
    };
    if (c.res.status >= 500) logger.error(entry, "request failed");
    else logger.info(entry, "request");
  };
}
