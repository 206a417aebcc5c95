import type { DeliveryOutcome } from "./delivery-outcome.js";
import type { Receipt } from "./receipts.js";

/**
 * The suppression list (docs/decisions/0039): recipients an organization's messages must not
 * reach. Why one is on it:
 * - `stop`: the recipient opted out (Twilio error 21610, or an opted-out receipt);
 * - `hard_bounce`: a permanent bounce of an e-mail address;
 * - `complaint`: the recipient reported an e-mail as spam;
 * - `subscription_gone`: a push service answered 404 or 410;
 * - `manual`: the organization added it.
 */
export const SUPPRESSION_REASONS = [
  "stop",
  "hard_bounce",
  "complaint",
  "subscription_gone",
  "manual",
] as const;
export type SuppressionReason = (typeof SUPPRESSION_REASONS)[number];

/** Reasons only lifted with `force`: the recipient asked for them, lifting one may break a law. */
export const FORCED_LIFT_REASONS: ReadonlySet<SuppressionReason> = new Set(["stop", "complaint"]);

/** Which entry suppressed a recipient, as the history shows it (never the recipient). */
export interface SuppressionEntry {
  reason: SuppressionReason;
  /** ISO 8601. */
  createdAt: string;
}

/**
 * What the worker found on the list for a message about to be attempted: the entries that match
 * its recipients, and whether they cover every recipient (an e-mail may name several; an SMS and
 * a push name one).
 */
export interface SuppressionFact {
  entries: readonly SuppressionEntry[];
  everyRecipient: boolean;
}

/**
 * The entry a provider's refusal adds: a push subscription gone (404/410), an SMS recipient who
 * replied STOP (Twilio's 21610; `opted_out` in the simulator). Undefined for any other outcome.
 */
export function suppressionReasonOf(
  channel: string,
  outcome: DeliveryOutcome,
): SuppressionReason | undefined {
  if (outcome.ok || outcome.error.class !== "rejected") return undefined;
  const { code } = outcome.error;
  if (channel === "push" && code === "subscription_gone") return "subscription_gone";
  if (channel === "sms" && (code === "21610" || code === "opted_out")) return "stop";
  return undefined;
}

/**
 * The enhanced status codes (RFC 3463) that say the address itself is bad: no such mailbox, bad
 * destination system or address syntax, moved, disabled. Policy and reputation refusals (5.7.x:
 * a blocklisted sending address, DMARC), a full mailbox (5.2.2), a message too big (5.3.4) or
 * unroutable (5.4.x) say nothing about the address: they bounce, and suppress nothing.
 */
export const ADDRESS_BOUNCE_CODES: ReadonlySet<string> = new Set([
  "5.1.1",
  "5.1.2",
  "5.1.3",
  "5.1.6",
  "5.1.10",
  "5.2.1",
]);

/**
 * The entry a delivery receipt adds: a complaint, a hard bounce (one of
 * {@link ADDRESS_BOUNCE_CODES}), an SMS the recipient opted out of (Twilio's 21610). Undefined for
 * any other receipt.
 */
export function suppressionReasonOfReceipt(
  receipt: Pick<Receipt, "state" | "errorCode">,
): SuppressionReason | undefined {
  if (receipt.state === "complained") return "complaint";
  if (receipt.state === "bounced" && ADDRESS_BOUNCE_CODES.has(receipt.errorCode ?? "")) return "hard_bounce";
  if (receipt.state === "undelivered" && receipt.errorCode === "21610") return "stop";
  return undefined;
}
