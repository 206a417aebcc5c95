import { lookup as dnsLookup, type LookupAddress } from "node:dns";
import { isIP, type LookupFunction, type Socket } from "node:net";
import { Agent, buildConnector, fetch as undiciFetch } from "undici";
import { AddressPolicy } from "./address-policy.js";

/**
 * `fetch` for requests to addresses tenants choose (push endpoints, later status webhooks): every
 * connection is checked against the {@link AddressPolicy} at connect time, on the address really
 * connected to. A name is resolved once, by the connection itself, and refused if any of its
 * addresses is not allowed, so a name that resolved to a public address when it was stored and
 * to 127.0.0.1 now (DNS rebinding) is refused; an IP literal, which the socket does not resolve,
 * is checked as it is; and the socket's remote address is checked again once connected.
 */

/** The connection was refused because of where it would have gone (no connection was made). */
export class OutboundAddressError extends Error {
  readonly code = "ERR_OUTBOUND_ADDRESS_REFUSED";
  constructor(
    readonly host: string,
    readonly address: string,
  ) {
    super(
      `outbound connection to ${host} refused: ${address} is not a public address nor in the allowed networks (OUTBOUND_ALLOWED_NETWORKS, WEBHOOK_ALLOWED_NETWORKS for webhooks)`,
    );
    this.name = "OutboundAddressError";
  }
}

/** Whether `err` (as `fetch` throws it, or its cause) is an {@link OutboundAddressError}. */
export function isOutboundAddressError(err: unknown): err is OutboundAddressError {
  if (err instanceof OutboundAddressError) return true;
  return err instanceof Error && err.cause instanceof OutboundAddressError;
}

/** Resolves a host name to all its addresses; injected in tests (a resolver that changes its answers). */
export type Resolve = (hostname: string, family: 0 | 4 | 6) => Promise<LookupAddress[]>;

const systemResolve: Resolve = (hostname, family) =>
  new Promise((resolve, reject) =>
    dnsLookup(hostname, { all: true, family }, (err, addresses) => (err ? reject(err) : resolve(addresses))),
  );

export interface OutboundOptions {
  /** CIDRs an operator allows besides public addresses (OUTBOUND_ALLOWED_NETWORKS, WEBHOOK_ALLOWED_NETWORKS). */
  allowedNetworks?: readonly string[];
  /** Defaults to the system resolver (`dns.lookup`, as a socket uses). */
  resolve?: Resolve;
}

/** A socket `lookup` that answers only with allowed addresses, and fails when any is not. */
export function guardedLookup(policy: AddressPolicy, resolve: Resolve = systemResolve): LookupFunction {
  return (hostname, options, callback) => {
    const family = options.family === 4 || options.family === 6 ? options.family : 0;
    resolve(hostname, family).then(
      (addresses) => {
        const refused = addresses.find(({ address }) => !policy.allows(address));
        const first = addresses[0];
        if (refused) return callback(new OutboundAddressError(hostname, refused.address), "", 0);
        if (!first)
          return callback(
            Object.assign(new Error(`no address for ${hostname}`), { code: "ENOTFOUND" }),
            "",
            0,
          );
        if (options.all) return callback(null, addresses);
        return callback(null, first.address, first.family);
      },
      (err: NodeJS.ErrnoException) => callback(err, "", 0),
    );
  };
}

/** An undici Agent whose every connection passes the {@link AddressPolicy}. */
export function createOutboundAgent(options: OutboundOptions = {}): Agent {
  const policy = new AddressPolicy(options.allowedNetworks);
  const connectSocket = buildConnector({ lookup: guardedLookup(policy, options.resolve) });
  const connect: buildConnector.connector = (connectOptions, callback) => {
    const { hostname } = connectOptions;
    // A socket resolves nothing for an IP literal (undici gives IPv6 ones without brackets).
    if (isIP(hostname) && !policy.allows(hostname)) {
      callback(new OutboundAddressError(hostname, hostname), null);
      return;
    }
    connectSocket(connectOptions, (err, socket) => {
      if (err || !socket) return callback(err ?? new Error("no socket"), null);
      const remote = (socket as Socket).remoteAddress;
      if (remote === undefined || !policy.allows(remote)) {
        socket.destroy();
        return callback(new OutboundAddressError(hostname, remote ?? "an unknown address"), null);
      }
      return callback(null, socket);
    });
  };
  return new Agent({ connect });
}

/**
 * A `fetch` through `agent` that never follows a redirect (a 3xx comes back as it is: the caller
 * treats it as a failure, never as the answer of the place it points at). It is the undici
 * package's own `fetch`, the same version as the Agent: Node's built-in `fetch` bundles its own
 * undici (7 from Node 24), whose dispatcher interface an Agent of another major version breaks.
 */
export function outboundFetch(agent: Agent): typeof fetch {
  return (input, init) =>
    undiciFetch(input as Parameters<typeof undiciFetch>[0], {
      ...(init as Parameters<typeof undiciFetch>[1]),
      redirect: "manual",
      dispatcher: agent,
    }) as unknown as Promise<Response>;
}
