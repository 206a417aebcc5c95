import { getConnInfo } from "@hono/node-server/conninfo";
import type { ClientOnboardingContext } from "./types.js";

/**
 * How to find the client's address. With `trustProxy`, the last address of `X-Forwarded-For`:
 * the one our own proxy appended (earlier entries come from the client and can be forged);
 * without the header, or without `trustProxy`, the socket's address.
 * Outside a Node server (e.g. `app.request` in tests) there is no socket: "unknown".
 */
export function clientIpResolver(trustProxy: boolean): (c: ClientOnboardingContext) => string {
  return function clientIp(c) {
    if (trustProxy) {
      const last = c.req.header("x-forwarded-for")?.split(",").at(-1)?.trim();
      if (last) return last;
    }
    try {
      return getConnInfo(c).remote.address ?? "unknown";
    } catch {
      return "unknown";
    }
  };
}
