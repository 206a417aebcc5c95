import { parsePhoneNumberFromString } from "libphonenumber-js/max";

/**
 * SMS sender ids: what one is and its one normal form. The send request and the sender
 * registration (src/channels/sms/request.ts) and the throughput overrides of the configuration
 * (`SMS_SENDER_RATES`, docs/decisions/0048) all read them here, so a sender is the same sender
 * wherever it is named. (Here rather than in the channel: the configuration may import only
 * src/runtime.)
 */

/** What carriers tell apart: a text shown as the sender, a short code, or a phone number. */
export type SmsSenderKind = "alphanumeric" | "short_code" | "number";

export interface SmsSenderId {
  /** Trimmed; a phone number in E.164. */
  value: string;
  kind: SmsSenderKind;
}

const ALPHANUMERIC_SENDER = /^(?=.*[A-Za-z])[A-Za-z0-9](?:[A-Za-z0-9 ]{0,9}[A-Za-z0-9])?$/;
const SHORT_CODE = /^\d{3,8}$/;

/**
 * A sender id in its normal form: an alphanumeric id (1-11 letters, digits or inner spaces, one
 * letter at least) or a 3-8 digit short code as given (trimmed), or a valid phone number in
 * international format as E.164. Undefined for anything else.
 */
export function parseSmsSender(raw: string): SmsSenderId | undefined {
  const value = raw.trim();
  if (ALPHANUMERIC_SENDER.test(value)) return { value, kind: "alphanumeric" };
  if (SHORT_CODE.test(value)) return { value, kind: "short_code" };
  const parsed = value.startsWith("+") ? parsePhoneNumberFromString(value, { extract: false }) : undefined;
  return parsed?.isValid() ? { value: parsed.number, kind: "number" } : undefined;
}

/**
 * The kind of a sender id already in its normal form (a message's sender), without parsing the
 * number again.
 */
export function smsSenderKind(normalised: string): SmsSenderKind {
  if (normalised.startsWith("+")) return "number";
  return SHORT_CODE.test(normalised) ? "short_code" : "alphanumeric";
}

/**
 * Which throughput limit a normalised sender id shares: its value, an alphanumeric id upper-cased.
 * Messages keep the case their client gave, but `Acme` and `ACME` are one sender to limit: the
 * stricter reading, since carriers do not promise to tell them apart.
 */
export function smsSenderLimitKey(normalised: string): string {
  return smsSenderKind(normalised) === "alphanumeric" ? normalised.toUpperCase() : normalised;
}
