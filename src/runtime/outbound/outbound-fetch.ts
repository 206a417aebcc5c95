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

/** What one POST answered: its status and its `Retry-After` header, if any. */
export interface PostAnswer {
  status: number;
  retryAfter: string | null;
}

/** Aborts a request under way (registered with {@link PostOptions.cancellable}). */
export type AbortRequest = (reason: Error) => void;

export interface PostOptions {
  headers: Record<string, string>;
  body: string;
  /** The deadline of the whole request, connection and answer included. */
  timeoutMs: number;
  /**
   * Called with the request's abort once it starts; returns what to call once it has ended. Lets
   * a caller abort everything in flight (a shutdown) without a signal and a listener per request.
   */
  cancellable?: (abort: AbortRequest) => () => void;
}

/** A POST through the outbound guard (see {@link outboundPost}). */
export type OutboundPost = (url: string, options: PostOptions) => Promise<PostAnswer>;

/** The request's deadline passed (`name` is `TimeoutError`, as an aborted `fetch`'s). */
export class OutboundTimeoutError extends Error {
  readonly code = "ETIMEDOUT";
  constructor(timeoutMs: number) {
    super(`outbound request timed out after ${timeoutMs} ms`);
    this.name = "TimeoutError";
  }
}

/** An answer's body is read and dropped up to this size; a longer one closes the connection. */
const MAX_DISCARDED_BODY = 128 * 1024;

/**
 * POSTs `body` to `url` through `agent` (its connections pass the outbound guard) with undici's
 * low-level `dispatch`: no Request, Response, web stream nor AbortSignal per request, which
 * `fetch` builds (decision 0036). It never follows a redirect (a 3xx is the answer). The answer's
 * body is read and dropped, so that the connection is kept alive for the next request to the
 * origin, up to {@link MAX_DISCARDED_BODY} bytes, past which the connection is closed. It resolves
 * with the status and `Retry-After` once the answer has ended (or was cut short after its
 * headers), and rejects with what failed before the headers: a connection refused by the guard
 * ({@link OutboundAddressError}), the deadline ({@link OutboundTimeoutError}), an abort (its reason).
 */
export function outboundPost(agent: Agent): OutboundPost {
  return (url, { headers, body, timeoutMs, cancellable }) =>
    new Promise<PostAnswer>((resolve, reject) => {
      let target: URL;
      try {
        target = new URL(url);
      } catch (error) {
        reject(error);
        return;
      }
      let abortRequest: AbortRequest | undefined;
      let abortedWith: Error | undefined;
      let discarded = 0;
      let answer: PostAnswer | undefined;
      let ended = false;
      const abort: AbortRequest = (reason) => {
        if (ended) return;
        if (abortRequest) abortRequest(reason);
        else abortedWith = reason; // not connected yet: aborted once it is
        end(reason);
      };
      const timer = setTimeout(() => abort(new OutboundTimeoutError(timeoutMs)), timeoutMs);
      const unregister = cancellable?.(abort);
      function end(error?: Error) {
        if (ended) return;
        ended = true;
        clearTimeout(timer);
        unregister?.();
        if (answer) resolve(answer);
        else reject(error ?? new Error("no answer"));
      }
      try {
        agent.dispatch(
          {
            origin: target.origin,
            path: `${target.pathname}${target.search}`,
            method: "POST",
            headers,
            body,
            headersTimeout: timeoutMs,
            bodyTimeout: timeoutMs,
          },
          {
            onConnect(abortIt) {
              if (abortedWith) abortIt(abortedWith);
              else abortRequest = abortIt;
            },
            onHeaders(statusCode, rawHeaders) {
              if (statusCode < 200) return true; // informational: the answer follows
              answer = { status: statusCode, retryAfter: headerValue(rawHeaders, "retry-after") };
              return true;
            },
            onData(chunk) {
              discarded += chunk.length;
              if (discarded > MAX_DISCARDED_BODY && abortRequest) abortRequest(new Error("answer too long"));
              return true;
            },
            onComplete() {
              end();
            },
            onError(error) {
              end(error);
            },
          },
        );
      } catch (error) {
        end(error as Error);
      }
    });
}

/** A header's value from undici's raw headers (names and values alternating), or null. */
function headerValue(rawHeaders: Buffer[] | string[] | null, name: string): string | null {
  if (!rawHeaders) return null;
  for (let i = 0; i + 1 < rawHeaders.length; i += 2) {
    const key = rawHeaders[i];
    if (key !== undefined && key.length === name.length && key.toString().toLowerCase() === name) {
      return String(rawHeaders[i + 1]);
    }
  }
  return null;
}
