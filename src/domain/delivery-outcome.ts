/**
 * What a provider said about one delivery attempt. Every failure says how it may be handled:
 * - `transient`: worth retrying (network error, timeout, provider 5xx or 429);
 * - `rejected`: the provider refused the recipient for good (invalid, opted out, not mobile);
 * - `permanent`: the request itself cannot succeed (bad credentials, bad sender, other 4xx).
 */
export const FAILURE_CLASSES = ["transient", "rejected", "permanent"] as const;
export type FailureClass = (typeof FAILURE_CLASSES)[number];

export interface DeliveryError {
  class: FailureClass;
  /** Provider's own error code where it gave one (e.g. Twilio's 21211), else a short slug. */
  code: string;
  message: string;
  /** The provider asked us to wait at least this long (HTTP Retry-After). */
  retryAfterMs?: number;
}

/** What a provider charges for a message, as it said it (docs/decisions/0043). */
export interface Price {
  /** A decimal number as the provider wrote it: Twilio's are negative, a charge ("-0.00750"). */
  amount: string;
  /** ISO 4217 code ("USD"). */
  currency: string;
}

/**
 * A provider of a provider list (docs/decisions/0046) that an attempt went to before the one that
 * gave its outcome, and the error that provably left the message untaken there (a refused
 * connection, a 429), so the attempt moved on to the next provider.
 */
export interface ProviderFailover {
  /** The account's name (`twilio:primary`). */
  provider: string;
  error: DeliveryError;
  /** What that provider said, for the worker's log only (never recorded in an event). */
  detail?: string;
}

/**
 * A refusal by the account, not of the recipient or the content (docs/decisions/0046): the
 * provider took nothing, and another account may take the same message.
 * - `account`: the account itself is refused (wrong credentials, an account suspended,
 *   authentication required), as every message would be: its circuit breaker counts it;
 * - `sender`: this message is not allowed on this account (its From is not the account's, relaying
 *   for it denied), which depends on the message: its breaker does not count it, or one
 *   organization's sender could have every organization skip the account.
 */
export type AccountRefusal = "account" | "sender";

/**
 * `error.message` is ours: fixed text that quotes nothing the provider answered (tenants read it
 * in the message's history). What the provider said, if anything (its reply text, a header, which
 * address failed), is `detail`, for the worker's log only; no event ever records it. A success
 * may carry what the provider charges (`price`) and how many segments it counted (`segments`),
 * when it said so in a form checked to be only that. An outcome of a provider list carries
 * `failovers` (empty when the first provider answered): its events then name the provider of a
 * failure too, and the providers left first.
 */
export type DeliveryOutcome =
  | {
      ok: true;
      provider: string;
      providerMessageId: string;
      price?: Price;
      segments?: number;
      detail?: string;
      /** Sent through a provider list: the providers the attempt left first (maybe none). */
      failovers?: readonly ProviderFailover[];
    }
  | {
      ok: false;
      provider: string;
      error: DeliveryError;
      detail?: string;
      /**
       * The provider provably did not take the message (the connection was refused, it answered
       * 429): another provider may be tried within the same attempt without sending it twice.
       * Unset when it may have taken it (a time-out after the request left, a connection reset,
       * any 5xx: a 503 may come from an edge after the provider made the message).
       */
      notTaken?: boolean;
      /**
       * The account refused the message (its error is `permanent`), not its recipient: with
       * `notTaken`, a provider list moves the attempt to the next account. One provider alone
       * treats it as the permanent error it is.
       */
      accountRefusal?: AccountRefusal;
      /** Sent through a provider list: the providers the attempt left first (maybe none). */
      failovers?: readonly ProviderFailover[];
    };
