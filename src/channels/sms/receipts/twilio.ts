import { createHmac, timingSafeEqual } from "node:crypto";
import type { Receipt } from "../../../domain/receipts.js";

/**
 * Twilio's SMS status callbacks (docs/decisions/0038): where Twilio is told to send them, how
 * their signature is checked, and what each says as a delivery receipt. The intake route
 * (src/api/routes/callbacks/twilio-sms.ts) is a thin shell around these.
 */

/** The path of a message's status callback; our id in it (a receipt may come before Twilio's SID is stored). */
export const TWILIO_SMS_CALLBACK_PATH = "/callbacks/twilio/sms";

/** The `StatusCallback` Twilio is given for a message: `PUBLIC_BASE_URL` + the path + our id. */
export function twilioStatusCallbackUrl(publicBaseUrl: string, messageId: string): string {
  return `${publicBaseUrl.replace(/\/+$/, "")}${TWILIO_SMS_CALLBACK_PATH}/${encodeURIComponent(messageId)}`;
}

/** A form body's parameters, each name with its values in order (a name may repeat). */
export type FormParams = ReadonlyMap<string, readonly string[]>;

export function formParams(body: string): FormParams {
  const params = new Map<string, string[]>();
  for (const [name, value] of new URLSearchParams(body)) {
    const values = params.get(name);
    if (values) values.push(value);
    else params.set(name, [value]);
  }
  return params;
}

/**
 * Twilio's signature of a request: base64 of HMAC-SHA1, keyed by the auth token, over the URL
 * Twilio requested followed by each form parameter's name and value, the names sorted (a name's
 * several values each appended with it, deduplicated and sorted, as Twilio's own helper does).
 */
export function twilioSignature(authToken: string, url: string, params: FormParams): string {
  let data = url;
  for (const name of [...params.keys()].sort()) {
    for (const value of [...new Set(params.get(name))].sort()) data += name + value;
  }
  return createHmac("sha1", authToken).update(data, "utf8").digest("base64");
}

/**
 * Whether `header` (`X-Twilio-Signature`) is Twilio's signature of a request to `url` (the URL
 * we gave Twilio, built from PUBLIC_BASE_URL: never from the request's `Host` or a forwarded
 * header) with these parameters. Compared in constant time. Twilio may sign the URL with or
 * without its scheme's default port (its own helper accepts both), so both are tried.
 */
export function verifyTwilioSignature(
  authToken: string,
  url: string,
  params: FormParams,
  header: string | undefined,
): boolean {
  if (!header || !authToken) return false;
  const given = Buffer.from(header, "utf8");
  let valid = false;
  // Every candidate is compared (no early exit), so the time does not say which one matched.
  for (const candidate of urlsWithAndWithoutDefaultPort(url)) {
    const expected = Buffer.from(twilioSignature(authToken, candidate, params), "utf8");
    if (expected.length === given.length && timingSafeEqual(expected, given)) valid = true;
  }
  return valid;
}

function urlsWithAndWithoutDefaultPort(url: string): string[] {
  const match = /^(https?):\/\/([^/?#]*)(.*)$/i.exec(url);
  if (!match) return [url];
  const [, scheme = "", authority = "", rest = ""] = match;
  const port = scheme.toLowerCase() === "https" ? ":443" : ":80";
  const bare = authority.endsWith(port) ? authority.slice(0, -port.length) : authority;
  const hasPort = /:\d+$/.test(bare.replace(/^\[[^\]]*\]/, ""));
  const urls = [`${scheme}://${bare}${rest}`];
  if (!hasPort) urls.push(`${scheme}://${bare}${port}${rest}`);
  return urls;
}

/** `MessageStatus` values that are a receipt, and the delivery state each says. */
const STATE_OF_STATUS: Readonly<Record<string, Receipt["state"]>> = {
  // Handed to the carrier; the carrier's report (delivered / undelivered) may follow.
  sent: "sent",
  delivered: "delivered",
  // WhatsApp and RCS: read by the recipient, so delivered.
  read: "delivered",
  // The carrier could not deliver it (ErrorCode says why: 30003 unreachable handset, 30005
  // unknown number, 30006 landline or unreachable carrier, 30007 filtered as spam, 30008 unknown).
  undelivered: "undelivered",
  // Twilio could not send it at all (e.g. 21610: the recipient replied STOP; 30001 queue overflow).
  failed: "undelivered",
};

/**
 * `MessageStatus` values Twilio reports before the carrier has it (`queued`, `accepted`,
 * `scheduled`, `sending`), or that concern no outgoing message we sent (`canceled` is a scheduled
 * message's, `receiving`/`received` incoming ones): not a receipt, nothing is recorded.
 */
export const TWILIO_STATUSES_NOT_RECEIPTS = [
  "queued",
  "accepted",
  "scheduled",
  "sending",
  "canceled",
  "receiving",
  "received",
] as const;

/** The ErrorCode Twilio gives when the recipient opted out (replied STOP): the suppression list's `stop`. */
export const TWILIO_OPTED_OUT_ERROR_CODE = "21610";

/** What a callback's parameters say. */
export type TwilioCallback =
  | { kind: "receipt"; receipt: Receipt }
  /** A status that is not a receipt (see {@link TWILIO_STATUSES_NOT_RECEIPTS}), or none we know. */
  | { kind: "not_a_receipt"; status: string }
  /** No `MessageStatus`, or a `MessageSid` that is no SID. */
  | { kind: "malformed"; problem: string };

const SID = /^[A-Za-z0-9]{1,64}$/;
const ERROR_CODE = /^\d{1,6}$/;

/**
 * A status callback's parameters as a delivery receipt. The error code is kept for the outcomes
 * that failed (`undelivered`, `failed`): on the others Twilio's ErrorCode, when present, says
 * nothing about the recipient.
 */
export function twilioCallback(params: FormParams): TwilioCallback {
  const status = single(params, "MessageStatus") ?? single(params, "SmsStatus");
  if (!status) return { kind: "malformed", problem: "no MessageStatus" };
  const sid = single(params, "MessageSid") ?? single(params, "SmsSid");
  if (sid !== undefined && !SID.test(sid)) return { kind: "malformed", problem: "MessageSid is not a SID" };
  const state = Object.hasOwn(STATE_OF_STATUS, status) ? STATE_OF_STATUS[status] : undefined;
  if (!state) return { kind: "not_a_receipt", status: status.slice(0, 40) };
  const code = single(params, "ErrorCode");
  return {
    kind: "receipt",
    receipt: {
      state,
      errorCode: state === "undelivered" && code !== undefined && ERROR_CODE.test(code) ? code : null,
      provider: "twilio",
      providerStatus: status,
      providerMessageId: sid ?? null,
    },
  };
}

function single(params: FormParams, name: string): string | undefined {
  const value = params.get(name)?.[0];
  return value === undefined || value === "" ? undefined : value;
}
