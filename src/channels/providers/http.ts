import type { DeliveryError } from "../../domain/delivery-outcome.js";
import { isOutboundAddressError } from "../../runtime/outbound/outbound-fetch.js";

/** What the providers that speak HTTP through `fetch` (Twilio, Web Push) share. */

/** `Retry-After` is either delay-seconds or an HTTP date (RFC 9110 §10.2.3). */
export function parseRetryAfter(header: string | null, now: number = Date.now()): number | undefined {
  if (header === null) return undefined;
  const value = header.trim();
  if (/^\d+$/.test(value)) return Number(value) * 1000;
  // Date.parse accepts bare numbers such as "-5" as years; an HTTP date always names a month.
  if (!/[a-z]/i.test(value)) return undefined;
  const date = Date.parse(value);
  if (Number.isNaN(date)) return undefined;
  return Math.max(0, date - now);
}

/**
 * Network failures that happen before a request leaves (no connection was made: refused, no such
 * host, no route, a TLS handshake that failed): the other side never saw the request, so it cannot
 * have acted on it. A time-out, a reset or a connection closed mid-exchange may come after it did.
 */
const NEVER_SENT_CODES = new Set([
  "ECONNREFUSED",
  "ENOTFOUND",
  "EAI_AGAIN",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "UND_ERR_CONNECT_TIMEOUT",
  "CERT_HAS_EXPIRED",
  "DEPTH_ZERO_SELF_SIGNED_CERT",
  "SELF_SIGNED_CERT_IN_CHAIN",
  "UNABLE_TO_VERIFY_LEAF_SIGNATURE",
  "ERR_TLS_CERT_ALTNAME_INVALID",
]);

/**
 * A `fetch` that threw: its time-out (the AbortSignal's), a connection the outbound guard refused
 * (the address is not public: `rejected`, as it will never be), or a network failure, the first
 * and last transient. `who` names the other side in words of ours ("Twilio", "the push service"):
 * the message quotes no host, address or port (it must not tell an open port from a closed one);
 * the `detail`, for the log, has what the network said. `notTaken`: the request provably never
 * reached the other side (docs/decisions/0046); a time-out never says so.
 */
export function classifyFetchError(
  err: unknown,
  who: string,
  timeoutMs: number,
): { error: DeliveryError; detail: string; notTaken?: true } {
  const detail = describe(err);
  if (err instanceof Error && (err.name === "TimeoutError" || err.name === "AbortError")) {
    return {
      error: { class: "transient", code: "timeout", message: `No answer from ${who} within ${timeoutMs} ms` },
      detail,
    };
  }
  if (isOutboundAddressError(err)) {
    return {
      error: {
        class: "rejected",
        code: "address_not_allowed",
        message: `Not sent: the address of ${who} is not allowed`,
      },
      detail,
    };
  }
  const error: DeliveryError = {
    class: "transient",
    code: "network_error",
    message: `Could not reach ${who}`,
  };
  return NEVER_SENT_CODES.has(causeCode(err) ?? "") ? { error, detail, notTaken: true } : { error, detail };
}

function causeCode(err: unknown): string | undefined {
  const cause: unknown = err instanceof Error ? err.cause : undefined;
  return cause instanceof Error && "code" in cause && typeof cause.code === "string" ? cause.code : undefined;
}

/**
 * HTTP answers that say the request was not acted on and may be made elsewhere: only 429 (too
 * many requests: a rate limit refuses a request before it is processed). Every 5xx, 503 included,
 * says nothing of the kind: a gateway or edge in front of the service may answer it after the
 * service behind it took the request (Twilio's own 20503 does not promise that the request was
 * not processed either), so another account must not be tried for the same attempt.
 */
export function refusedUntaken(status: number): boolean {
  return status === 429;
}

/** undici reports every network failure as "fetch failed"; the useful part is in `cause`. */
function describe(err: unknown): string {
  if (!(err instanceof Error)) return String(err);
  const cause: unknown = err.cause;
  if (cause instanceof Error) {
    const code = "code" in cause && typeof cause.code === "string" ? cause.code : undefined;
    return [code, cause.message].filter(Boolean).join(": ") || err.message;
  }
  return err.message;
}

/**
 * An HTTP error answer as every provider that speaks HTTP reads it, once its own meanings (Twilio's
 * error codes, a push service's 404 and 410) are ruled out: 429 is `transient` and carries its
 * `Retry-After`, 5xx is `transient`, and anything else `permanent`, since the same request would
 * be refused the same way.
 */
export function httpStatusError(response: Response, code: string, message: string): DeliveryError {
  const status = response.status;
  if (status === 429) {
    const retryAfterMs = parseRetryAfter(response.headers.get("retry-after"));
    return { class: "transient", code, message, ...(retryAfterMs !== undefined ? { retryAfterMs } : {}) };
  }
  if (status >= 500) return { class: "transient", code, message };
  return { class: "permanent", code, message };
}
