import { parsePhoneNumberFromString } from "libphonenumber-js/max";
import { z } from "zod";
import type { SenderClaim } from "../../domain/senders.js";
import type { Config } from "../../runtime/config.js";
import { parseSmsSender } from "../../runtime/sms-sender-id.js";
import type { ContentOf, Measures } from "../channel.js";
import { payloadObjectError } from "../request.js";
import { smsSegments } from "./segments.js";

/**
 * A phone number in international format (a leading + and the country code), normalised to E.164.
 * Digits without the + are refused rather than guessed at: a national number read as
 * international is often another country's valid number (a US 646 555 0100 read as +64… is in New Zealand).
 */
export const phoneNumber = z
  .string({ error: "must be a string" })
  .transform((value, ctx) => {
    const trimmed = value.trim();
    // extract: false, the whole string must be the number ("call +1… now" is not one), which
    // also spares libphonenumber a search through the text.
    const parsed = trimmed.startsWith("+")
      ? parsePhoneNumberFromString(trimmed, { extract: false })
      : undefined;
    if (!parsed?.isValid()) {
      ctx.addIssue({
        code: "custom",
        message:
          "must be a valid phone number in international format: + and the country code, e.g. +14155550100",
      });
      return z.NEVER;
    }
    return parsed.number;
  })
  .meta({
    description:
      "A phone number in international format (+ and the country code; spaces, dots, dashes and brackets allowed), normalised to E.164",
    example: "+14155550100",
  });

/** An SMS sender: an alphanumeric id (1-11 characters, one letter at least), a short code, or E.164. */
export const smsSender = z
  .string({ error: "must be a string" })
  .transform((value, ctx) => {
    const sender = parseSmsSender(value);
    if (sender) return sender.value;
    ctx.addIssue({
      code: "custom",
      message:
        "must be an alphanumeric sender id (1-11 letters, digits or spaces, at least one letter), a short code, or an E.164 number",
    });
    return z.NEVER;
  })
  .meta({
    description:
      "An alphanumeric sender id (1-11 letters, digits or inner spaces, one letter at least), a 3-8 digit short code or an E.164 number; default `SMS_DEFAULT_SENDER`",
    example: "ACME",
  });

/** An SMS send request's `payload`. */
export const smsPayload = z.strictObject(
  {
    to: phoneNumber,
    body: z
      .string({ error: "must be a string" })
      .max(1600, "must be at most 1600 characters")
      .refine((v) => v.trim().length > 0, "must not be empty")
      .meta({
        description:
          "The text: 1-1600 characters, not blank, and at most `SMS_MAX_SEGMENTS` segments (default 10: 1,530 GSM-7 characters, 670 UCS-2 units)",
        minLength: 1,
        pattern: "\\S",
      }),
    sender: smsSender.optional(),
  },
  payloadObjectError,
);

/**
 * The message's content: the sender, when the request names none, is `SMS_DEFAULT_SENDER`; the
 * body's segments and encoding are counted here, once (they come last: see `requestHash`).
 */
export function smsContent(payload: z.output<typeof smsPayload>, config: Config): ContentOf<"sms"> {
  const { segments, encoding } = smsSegments(payload.body);
  return {
    channel: "sms",
    recipient: payload.to,
    sender: payload.sender ?? config.SMS_DEFAULT_SENDER,
    body: payload.body,
    segments,
    encoding,
  };
}

/** The segments and encoding counted at acceptance; undefined for a message accepted before they were. */
export function smsMeasures(content: ContentOf<"sms">): Measures | undefined {
  const { segments, encoding } = content;
  return segments === undefined || encoding === undefined ? undefined : { segments, encoding };
}

/** A body that needs more than `SMS_MAX_SEGMENTS` segments is refused, saying how many it needs. */
export function refuseSms(content: ContentOf<"sms">, config: Config): string | undefined {
  // Every content smsContent made is counted; one that is not would be counted now.
  const { segments, encoding } = smsMeasures(content) ?? smsSegments(content.body);
  if (segments <= config.SMS_MAX_SEGMENTS) return undefined;
  return (
    `payload.body needs ${segments} segments (${encoding}); ` +
    `at most ${config.SMS_MAX_SEGMENTS} are allowed (SMS_MAX_SEGMENTS)`
  );
}

/** The sender to verify: any but the platform's own default, which every organization may use. */
export function smsSenderClaim(content: ContentOf<"sms">, config: Config): SenderClaim | undefined {
  if (content.sender === config.SMS_DEFAULT_SENDER) return undefined;
  return { kind: "sms_sender", value: content.sender, described: `sender ${content.sender}` };
}
