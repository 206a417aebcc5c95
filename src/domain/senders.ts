/**
 * Verified senders: the addresses an organization may send as. An e-mail is sent from a domain
 * the organization proved it controls (a DNS TXT record it published); an SMS from a sender id an
 * operator approved. Pure rules: what a sender is, how its value is normalised, what a TXT answer
 * proves.
 */

export const SENDER_KINDS = ["email_domain", "sms_sender"] as const;
export type SenderKind = (typeof SENDER_KINDS)[number];

export const SENDER_STATUSES = ["pending", "verified"] as const;
export type SenderStatus = (typeof SENDER_STATUSES)[number];

/** What a message claims to be sent as, and how to name it in a refusal. */
export interface SenderClaim {
  kind: SenderKind;
  /** Normalised as it is stored: a lower-case domain, or an SMS sender as the request schema gives it. */
  value: string;
  /** How the refusal names it: `from_email domain example.com`, `sender BANK`. */
  described: string;
}

/** The DNS name under which an organization publishes its proof for `domain`. */
export function verificationRecordName(domain: string): string {
  return `_notify-verification.${domain}`;
}

/** The TXT record's content: the token itself, which starts `ntf-verify=`. */
export const VERIFICATION_TOKEN_PREFIX = "ntf-verify=";

const LABEL = /^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$/;

/**
 * A domain name as it is registered and compared: trimmed, lower case, without a final dot.
 * Undefined unless it is a DNS host name of two labels or more (letters, digits, inner hyphens;
 * internationalised names in their `xn--` form), at most 253 characters, whose last label is not
 * all digits (an IP address is not a domain).
 */
export function normaliseDomain(value: string): string | undefined {
  const domain = value.trim().toLowerCase().replace(/\.$/, "");
  if (domain.length === 0 || domain.length > 253) return undefined;
  const labels = domain.split(".");
  if (labels.length < 2 || !labels.every((label) => LABEL.test(label))) return undefined;
  if (/^\d+$/.test(labels[labels.length - 1] ?? "")) return undefined;
  return domain;
}

/** The domain of an e-mail address, lower case (the part after its last `@`). */
export function emailDomainOf(address: string): string {
  return address.slice(address.lastIndexOf("@") + 1).toLowerCase();
}

/**
 * Whether a TXT answer holds the token. A TXT record may come in several strings of up to 255
 * characters each, which make one value joined; surrounding spaces are not the publisher's intent.
 */
export function txtRecordsProve(records: readonly (readonly string[])[], token: string): boolean {
  return records.some((chunks) => chunks.join("").trim() === token);
}
