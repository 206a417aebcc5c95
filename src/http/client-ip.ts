import { getConnInfo } from "@hono/node-server/conninfo";
import type { Context } from "hono";
import ipaddr from "ipaddr.js";

/**
 * How to find the client's address. With `trustProxy`, the last address of `X-Forwarded-For`:
 * the one our own proxy appended (earlier entries come from the client and can be forged);
 * without the header, or without `trustProxy`, the socket's address.
 * Outside a Node server (e.g. `app.request` in tests) there is no socket: "unknown".
 */
export function clientIpResolver(trustProxy: boolean): (c: Context) => string {
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

/** The prefix one IPv6 subscriber is given at the least (RFC 6177): all its addresses are one client. */
const IPV6_SUBSCRIBER_PREFIX = 64;

/**
 * The key a per-client limit counts by: an IPv4 address as it is (also when written as an
 * IPv4-mapped IPv6 address, as a dual-stack socket gives it), and an IPv6 address's /64, since
 * whoever holds one address of a /64 usually holds all 2^64 of them. Anything that is not an
 * address (e.g. "unknown") is its own key.
 */
export function clientLimitKey(address: string): string {
  if (!ipaddr.isValid(address)) return address;
  const ip = ipaddr.process(address);
  if (ip.kind() === "ipv4") return ip.toString();
  const network = ipaddr.IPv6.networkAddressFromCIDR(`${ip.toNormalizedString()}/${IPV6_SUBSCRIBER_PREFIX}`);
  return `${network.toRFC5952String()}/${IPV6_SUBSCRIBER_PREFIX}`;
}
