import { z } from "zod";
import { CHANNELS, FAILED_REASONS, REJECTED_REASONS, STATUSES } from "../../domain/events.js";
import { PRIORITY_TIERS } from "../../domain/priority.js";
import { DELIVERY_STATES } from "../../domain/receipts.js";
import type { MessageRow } from "../../store/projection.js";
import { smsEncodingField, smsSegmentsField } from "./common-schemas.js";

const timestamp = z.iso.datetime().meta({ description: "ISO 8601, UTC" });

/** The record's shape, for the OpenAPI document; {@link toMessageRecord} is typed by it. */
export const messageRecord = z
  .object({
    message_id: z.uuid(),
    channel: z.enum(CHANNELS),
    status: z.enum(STATUSES),
    status_reason: z
      .enum([...FAILED_REASONS, ...REJECTED_REASONS])
      .nullable()
      .meta({
        description:
          "Why a `failed` or `rejected` message ended so (e.g. `retries_exhausted`, `ttl_expired`, `recipient_refused`, `recipient_suppressed`, `canceled`); null otherwise. Its history has the details",
      }),
    send_at: timestamp.nullable().meta({
      description:
        "A scheduled send's `send_at`: no attempt started before it; null for a message sent at once",
    }),
    delivery_time: timestamp
      .nullable()
      .meta({ description: "When the provider accepted it; null until then" }),
    delivery: z
      .object({
        state: z.enum(DELIVERY_STATES).meta({
          description:
            "What the provider's receipts said: `unknown` until one comes (and for good without PUBLIC_BASE_URL or for a provider that sends none); `sent` handed to the carrier; `delivered`; `undelivered` (see `error_code`); e-mail `bounced`, `complained`. Forward-only; it never changes `status`",
        }),
        updated_at: timestamp
          .nullable()
          .meta({ description: "When the receipt that set `state` came; null while `unknown`" }),
        error_code: z.string().nullable().meta({
          description: "That receipt's error code (SMS: Twilio's `ErrorCode`, e.g. `30003`), if it had one",
        }),
      })
      .meta({
        id: "Delivery",
        description: "What reached the recipient, as far as the providers' receipts say",
      }),
    organization_id: z.uuid(),
    product_id: z.string(),
    receiver_id: z.string().nullable().meta({
      description:
        "The recipient: SMS the E.164 number; e-mail the `to` addresses, comma-separated; push the subscription's endpoint. Null once the message's content was erased",
    }),
    sender_id: z.string().meta({
      description: "SMS the sender id; e-mail `from_email`; push the VAPID subject (`VAPID_SUBJECT`)",
    }),
    segments: smsSegmentsField.nullable().meta({
      description:
        "SMS: how many segments (messages billed) the body is sent as, counted at acceptance (one of up to 160 GSM-7 septets or 70 UCS-2 units; a longer body in parts of 153 or 67). Null for e-mail and push, and for an SMS accepted before segments were counted. Kept when the content is erased",
    }),
    encoding: smsEncodingField.nullable().meta({
      description:
        "SMS: `GSM-7`, or `UCS-2` when one character is outside the GSM 03.38 alphabet. Null as `segments` is",
    }),
    retry_count: z.int().min(0),
    created_at: timestamp,
    updated_at: timestamp,
    payload: z.object({
      Organization_id: z.uuid(),
      channel: z.enum(CHANNELS),
      id: z.uuid(),
      message: z.string().nullable().meta({
        description:
          "SMS: the text; push: the notification's body; e-mail: null (the template is its body). Null once the content was erased",
      }),
      priority: z.enum(PRIORITY_TIERS),
      product_id: z.string(),
      recipient: z.string().nullable().meta({ description: "As `receiver_id`; null once erased" }),
      retry_enabled: z.boolean(),
      sender: z.string(),
      retry_count: z.int().min(0),
      subject: z
        .string()
        .nullable()
        .meta({ description: "E-mail: the subject as sent (before merging); push: the title; SMS: null" }),
      template_fields: z.record(z.string(), z.unknown()).nullable().meta({
        description:
          "E-mail: the request's `payload` (template_name, template_content, message); otherwise null",
      }),
    }),
  })
  .meta({
    id: "MessageRecord",
    description: "A message's record (spec section 2.5), field names as the spec",
  });

export type MessageRecord = z.input<typeof messageRecord>;

/**
 * The message record of spec section 2.5, field names exactly as the spec writes them
 * (including `payload.Organization_id`). Every field is present; `null` where there is no value.
 */
export function toMessageRecord(row: MessageRow): MessageRecord {
  return {
    message_id: row.messageId,
    channel: row.channel,
    status: row.status,
    status_reason: (row.statusReason as MessageRecord["status_reason"]) ?? null,
    send_at: row.sendAt?.toISOString() ?? null,
    delivery_time: row.deliveryTime?.toISOString() ?? null,
    delivery: {
      state: row.deliveryState,
      updated_at: row.deliveryUpdatedAt?.toISOString() ?? null,
      error_code: row.deliveryErrorCode,
    },
    organization_id: row.organizationId,
    product_id: row.productId,
    receiver_id: row.recipient,
    sender_id: row.sender,
    segments: row.segments,
    encoding: row.encoding,
    retry_count: row.retryCount,
    created_at: row.createdAt.toISOString(),
    updated_at: row.updatedAt.toISOString(),
    payload: {
      Organization_id: row.organizationId,
      channel: row.channel,
      id: row.messageId,
      message: row.body,
      priority: row.priority,
      product_id: row.productId,
      recipient: row.recipient,
      retry_enabled: row.retryEnabled,
      sender: row.sender,
      retry_count: row.retryCount,
      subject: row.subject,
      template_fields: (row.templateFields as Record<string, unknown> | null) ?? null,
    },
  };
}
