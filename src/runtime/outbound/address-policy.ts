import ipaddr from "ipaddr.js";

/**
 * Which addresses the service's outbound requests (push services today, status webhooks next) may
 * connect to: public unicast addresses, plus the networks an operator allows explicitly. Loopback,
 * private, link-local (the cloud metadata address 169.254.169.254 among them), CGNAT, unique-local,
 * multicast, broadcast, unspecified and reserved ranges are refused, in IPv4 and IPv6, including
 * IPv4 addresses wrapped in IPv6 (IPv4-mapped, IPv4-translated, NAT64 and 6to4 forms), which are
 * judged by the IPv4 address they carry. ipaddr.js names the ranges; "unicast" is what it calls
 * an address in none of them.
 */

type Address = ipaddr.IPv4 | ipaddr.IPv6;
type Network = [Address, number];

/**
 * IPv6 ranges ipaddr.js calls unicast that are not: RFC 8215's local-use NAT64 prefix (an
 * operator's own translator, to addresses of its own), and the deprecated IPv4-compatible ::a.b.c.d.
 */
const NOT_PUBLIC_IPV6: readonly Network[] = [ipaddr.parseCIDR("64:ff9b:1::/48"), ipaddr.parseCIDR("::/96")];

/**
 * Parses a comma-separated list of networks (`10.1.0.0/16`, `fd00::/8`, or a bare address for
 * just that address); throws an Error naming the first entry that is not one.
 */
export function parseNetworks(list: string): string[] {
  const entries = list
    .split(",")
    .map((entry) => entry.trim())
    .filter((entry) => entry !== "");
  return entries.map((entry) => {
    const network = parseNetwork(entry);
    if (!network) throw new Error(`${JSON.stringify(entry)} is not an IP network (CIDR) or address`);
    return `${network[0].toString()}/${network[1]}`;
  });
}

function parseNetwork(entry: string): Network | undefined {
  try {
    if (entry.includes("/")) return ipaddr.parseCIDR(entry);
    const address = ipaddr.parse(entry);
    return [address, address.kind() === "ipv4" ? 32 : 128];
  } catch {
    return undefined;
  }
}

/** The address policy: public unicast addresses, and the networks `allowedNetworks` names. */
export class AddressPolicy {
  readonly #allowed: readonly Network[];

  /** `allowedNetworks` as {@link parseNetworks} returns them (a bad entry throws). */
  constructor(allowedNetworks: readonly string[] = []) {
    this.#allowed = allowedNetworks.map((entry) => {
      const network = parseNetwork(entry);
      if (!network) throw new Error(`${JSON.stringify(entry)} is not an IP network (CIDR) or address`);
      return network;
    });
  }

  /** Whether a connection to `address` (an IP address as text, e.g. from a DNS answer) may be made. */
  allows(address: string): boolean {
    const parsed = parseAddress(address);
    if (!parsed) return false;
    const embedded = parsed.kind() === "ipv6" ? embeddedIPv4(parsed as ipaddr.IPv6) : undefined;
    if (this.#inAllowedNetwork(parsed) || (embedded && this.#inAllowedNetwork(embedded))) return true;
    return isPublic(parsed, embedded);
  }

  #inAllowedNetwork(address: Address): boolean {
    return this.#allowed.some(
      ([network, bits]) => network.kind() === address.kind() && address.match(network, bits),
    );
  }
}

/** An IP address as text, or undefined when it is not one (a name, garbage). */
function parseAddress(text: string): Address | undefined {
  const bare = text.startsWith("[") && text.endsWith("]") ? text.slice(1, -1) : text;
  // ipaddr.parse also takes the classful shorthands ("127.1", "2130706433"); a resolver or a
  // socket never gives those, and a URL parser normalises them first, so only full forms count.
  if (!ipaddr.IPv4.isValidFourPartDecimal(bare) && !ipaddr.IPv6.isValid(bare)) return undefined;
  try {
    return ipaddr.parse(bare);
  } catch {
    return undefined;
  }
}

function isPublic(address: Address, embedded: ipaddr.IPv4 | undefined): boolean {
  if (address.kind() === "ipv6" && NOT_PUBLIC_IPV6.some(([network, bits]) => address.match(network, bits)))
    return false;
  if (embedded) return embedded.range() === "unicast";
  return address.range() === "unicast";
}

/**
 * The IPv4 address an IPv6 address stands for, when it is one of the forms that carry one: the
 * connection ends up at that IPv4 address (on this host's stack, or through a translator).
 */
function embeddedIPv4(address: ipaddr.IPv6): ipaddr.IPv4 | undefined {
  const parts = address.parts;
  const fromWords = (high: number, low: number) =>
    new ipaddr.IPv4([high >> 8, high & 0xff, low >> 8, low & 0xff]);
  switch (address.range()) {
    case "ipv4Mapped": // ::ffff:a.b.c.d
    case "rfc6145": // ::ffff:0:a.b.c.d
    case "rfc6052": // 64:ff9b::a.b.c.d (NAT64)
      return fromWords(parts[6] ?? 0, parts[7] ?? 0);
    case "6to4": // 2002:aabb:ccdd::
      return fromWords(parts[1] ?? 0, parts[2] ?? 0);
    default:
      return undefined;
  }
}
