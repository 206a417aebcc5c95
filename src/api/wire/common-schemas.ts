import { z } from "zod";
import { SMS_ENCODINGS } from "../../channels/sms/content.js";
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

export const dryRunQuery = z
  .enum(["true", "false"], { error: "must be true or false" })
  .optional()
  .transform((v) => v === "true")
  .meta({ description: "`true`: validate everything (the key included), store and send nothing" });

/** A listing's `limit`: an integer from 1 to `max`, `fallback` when absent. */
export function pageLimit(max: number, fallback: number, description: string) {
  const error = `must be an integer from 1 to ${max}`;
  return z.coerce
    .number({ error })
    .int(error)
    .min(1, error)
    .max(max, error)
    .default(fallback)
    .meta({ description });
}

/**
 * A send's `send_at`: RFC 3339 with its offset (`Z` or `+01:00`), to the millisecond at most. Its
 * range (not in the past, at most 35 days ahead) is checked against the clock by the route
 * (src/domain/schedule.ts).
 */
export const sendAtField = z.iso
  .datetime({
    offset: true,
    error:
      "must be an RFC 3339 date-time with an offset, e.g. 2026-01-31T09:00:00Z or 2026-01-31T10:00:00+01:00",
  })
  .transform((value) => new Date(value))
  .meta({
    description:
      "Schedules the send: no attempt starts before this instant (RFC 3339 with an offset; not in the past, at most 35 days ahead). The message is accepted at once and waits in the database; the tier's time-to-live counts from it. Cancel it before then with `POST /api/v1/messages/{message_id}/cancel`",
  });

/** What acceptance measured of an SMS body (docs/decisions/0043), as the 202 and the record show it. */
export const smsSegmentsField = z.int().min(1).meta({
  description:
    "SMS: how many segments (messages billed) the body is sent as: one of up to 160 GSM-7 septets or 70 UCS-2 units; a longer body in parts of 153 or 67",
});
export const smsEncodingField = z.enum(SMS_ENCODINGS).meta({
  description:
    "SMS: `GSM-7` when every character is in the GSM 03.38 alphabet (`€ [ ] { } \\ ^ ~ |` count two septets), else `UCS-2` (an emoji counts two units)",
});
