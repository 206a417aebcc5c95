import { parsePhoneNumberFromString } from "libphonenumber-js/max";
import { z } from "zod";
import { NOTIFICATION_TYPES } from "../../domain/priority.js";

// No `i` flag: the pattern goes into the OpenAPI document, where JSON Schema has no flags.
const UUID = /^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$/;

export const uuidParam = (name: string) =>
  z
    .string()
    .regex(UUID, `${name} must be a UUID`)
    .transform((v) => v.toLowerCase())
    .meta({ description: "A UUID (any case)", example: "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b" });

export const productIdParam = z
  .string()
  .regex(/^[A-Za-z0-9._-]{1,64}$/, "productId must be 1-64 characters of A-Z a-z 0-9 . _ -");

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
    // also spares libphonenumber a search through the text (~10 % of its cost).
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

const ALPHANUMERIC_SENDER = /^(?=.*[A-Za-z])[A-Za-z0-9](?:[A-Za-z0-9 ]{0,9}[A-Za-z0-9])?$/;
const SHORT_CODE = /^\d{3,8}$/;

/** An SMS sender: an alphanumeric id (1-11 characters, one letter at least), a short code, or E.164. */
export const smsSender = z
  .string({ error: "must be a string" })
  .transform((value, ctx) => {
    const trimmed = value.trim();
    if (ALPHANUMERIC_SENDER.test(trimmed) || SHORT_CODE.test(trimmed)) return trimmed;
    const parsed = trimmed.startsWith("+")
      ? parsePhoneNumberFromString(trimmed, { extract: false })
      : undefined;
    if (parsed?.isValid()) return parsed.number;
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

export const notificationType = z
  .enum(NOTIFICATION_TYPES, { error: () => `must be one of: ${NOTIFICATION_TYPES.join(", ")}` })
  .meta({ description: "Sets the priority tier; none means `medium`" });

/** `Idempotency-Key` header: 1-255 visible ASCII characters. */
export const idempotencyKeyHeader = z
  .string()
  .regex(/^[\x21-\x7e]{1,255}$/, "must be 1-255 visible ASCII characters")
  .optional()
  .meta({
    description:
      "Replays the first 202 for a repeated request (same key and body) within 24 h; 422 with another body",
  });

/**
 * Any JSON value. A parsed JSON body holds nothing else, so this only insists on presence;
 * (`z.json()` is recursive, which the OpenAPI generator cannot follow.)
 */
export const anyJson = z
  .unknown()
  .refine((value) => value !== undefined, "is required")
  .meta({ description: "Any JSON value" });

export const dryRunQuery = z
  .enum(["true", "false"], { error: "must be true or false" })
  .optional()
  .transform((v) => v === "true")
  .meta({ description: "`true`: validate everything (the key included), store and send nothing" });
