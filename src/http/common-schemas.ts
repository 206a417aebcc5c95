import { parsePhoneNumberFromString } from "libphonenumber-js/max";
import { z } from "zod";
import { NOTIFICATION_TYPES } from "../domain/priority.js";

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export const uuidParam = (name: string) =>
  z
    .string()
    .regex(UUID, `${name} must be a UUID`)
    .transform((v) => v.toLowerCase());

export const productIdParam = z
  .string()
  .regex(/^[A-Za-z0-9._-]{1,64}$/, "productId must be 1-64 characters of A-Z a-z 0-9 . _ -");

/** A phone number in international format, normalised to E.164. Digits alone get a leading +. */
export const phoneNumber = z.string({ error: "must be a string" }).transform((value, ctx) => {
  const trimmed = value.trim();
  const candidate = /^\d{8,15}$/.test(trimmed) ? `+${trimmed}` : trimmed;
  const parsed = parsePhoneNumberFromString(candidate);
  if (!parsed?.isValid()) {
    ctx.addIssue({
      code: "custom",
      message: "must be a valid phone number in international format, e.g. +14155550100",
    });
    return z.NEVER;
  }
  return parsed.number;
});

const ALPHANUMERIC_SENDER = /^(?=.*[A-Za-z])[A-Za-z0-9](?:[A-Za-z0-9 ]{0,9}[A-Za-z0-9])?$/;
const SHORT_CODE = /^\d{3,8}$/;

/** An SMS sender: an alphanumeric id (1-11 characters, one letter at least), a short code, or E.164. */
export const smsSender = z.string({ error: "must be a string" }).transform((value, ctx) => {
  const trimmed = value.trim();
  if (ALPHANUMERIC_SENDER.test(trimmed) || SHORT_CODE.test(trimmed)) return trimmed;
  const parsed = trimmed.startsWith("+") ? parsePhoneNumberFromString(trimmed) : undefined;
  if (parsed?.isValid()) return parsed.number;
  ctx.addIssue({
    code: "custom",
    message:
      "must be an alphanumeric sender id (1-11 letters, digits or spaces, at least one letter), a short code, or an E.164 number",
  });
  return z.NEVER;
});

export const notificationType = z.enum(NOTIFICATION_TYPES, {
  error: () => `must be one of: ${NOTIFICATION_TYPES.join(", ")}`,
});

/** `Idempotency-Key` header: 1-255 visible ASCII characters. */
export const idempotencyKeyHeader = z
  .string()
  .regex(/^[\x21-\x7e]{1,255}$/, "Idempotency-Key must be 1-255 visible ASCII characters")
  .optional();

export const dryRunQuery = z
  .enum(["true", "false"], { error: "dry_run must be true or false" })
  .optional()
  .transform((v) => v === "true");
