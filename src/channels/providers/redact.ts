import type { AccountRefusal, DeliveryError, DeliveryOutcome } from "../../domain/delivery-outcome.js";

/** The longest error message a provider reports. */
export const MAX_ERROR_MESSAGE_LENGTH = 300;

/** `text` with every (non-empty) secret replaced by "[redacted]". */
export function redact(text: string, secrets: readonly string[]): string {
  let redacted = text;
  for (const secret of secrets) if (secret !== "") redacted = redacted.replaceAll(secret, "[redacted]");
  return redacted;
}

/**
 * `text` with every (non-empty) recipient replaced by "[recipient]", whatever its case: servers
 * quote the address they refuse ("550 5.1.1 <Ada@Example.com>: Recipient address rejected"), and
 * the logs never hold a recipient either.
 */
export function redactRecipients(text: string, recipients: readonly string[]): string {
  const escaped = recipients
    .filter((r) => r !== "")
    .sort((a, b) => b.length - a.length)
    .map((r) => r.replace(/[.*+?^${}()|[\]\\]/g, "\\$&"));
  if (escaped.length === 0) return text;
  return text.replace(new RegExp(escaped.join("|"), "gi"), "[recipient]");
}

/** `text` cut to `max` characters, the last one an ellipsis when anything was cut. */
export function truncate(text: string, max: number): string {
  return text.length > max ? `${text.slice(0, max - 1)}…` : text;
}

/**
 * An error message fit for logs and the API, which must never carry a secret: redacted, then cut
 * (the other way round, a cut secret would no longer match and leak in part).
 */
export function cleanMessage(message: string, secrets: readonly string[]): string {
  return truncate(redact(message, secrets), MAX_ERROR_MESSAGE_LENGTH);
}

// biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what is removed
const CONTROL_AND_SPACE = /[\u0000-\u001f\u007f\s]+/g;

/** The longest provider detail the worker logs. */
export const MAX_DETAIL_LENGTH = 1000;

/** What a failure proves about the message (docs/decisions/0046). */
export interface Untaken {
  /** The provider provably did not take the message. */
  notTaken?: boolean;
  /** The account refused it, not the recipient (implies `notTaken`). */
  accountRefusal?: AccountRefusal | undefined;
}

/**
 * A provider's failed outcome, its message and its detail (for the log only) cleaned of `secrets`;
 * `notTaken` when the provider provably did not take the message, `accountRefusal` when the
 * account refused it rather than its recipient (docs/decisions/0046).
 */
export function failedOutcome(
  provider: string,
  error: DeliveryError,
  secrets: readonly string[],
  detail?: string,
  { notTaken, accountRefusal }: Untaken = {},
): DeliveryOutcome {
  return {
    ok: false,
    provider,
    error: { ...error, message: cleanMessage(error.message, secrets) },
    ...(detail ? { detail: cleanDetail(detail, secrets) } : {}),
    ...((notTaken || accountRefusal) && { notTaken: true }),
    ...(accountRefusal && { accountRefusal }),
  };
}

/** A provider's own words for the log: secrets redacted, control characters flattened, cut. */
export function cleanDetail(detail: string, secrets: readonly string[]): string {
  const flat = redact(detail, secrets).replace(CONTROL_AND_SPACE, " ").trim();
  return truncate(flat, MAX_DETAIL_LENGTH);
}
