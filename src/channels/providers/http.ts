import type { DeliveryError } from "../../domain/delivery-outcome.js";

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
 * A `fetch` that threw: its time-out (the AbortSignal's) or a network failure, both transient.
 * `who` names the other side, e.g. "Twilio" or "push service fcm.googleapis.com".
 */
export function classifyFetchError(err: unknown, who: string, timeoutMs: number): DeliveryError {
  if (err instanceof Error && (err.name === "TimeoutError" || err.name === "AbortError")) {
    return { class: "transient", code: "timeout", message: `No answer from ${who} within ${timeoutMs} ms` };
  }
  return { class: "transient", code: "network_error", message: `Could not reach ${who}: ${describe(err)}` };
}

/** undici reports every network failure as "fetch failed"; the useful part is in `cause`. */
function describe(err: unknown): string {
  if (!(err instanceof Error)) return String(err);
  const cause: unknown = err.cause;
  if (cause instanceof Error) {
    const code = "code" in cause && typeof cause.code === "string" ? cause.code : undefined;
    return cause.message || code || err.message;
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
