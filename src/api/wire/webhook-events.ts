import type { OpenAPIHono } from "@hono/zod-openapi";
import { z } from "zod";
import { CHANNELS, STATUSES } from "../../domain/events.js";
import { PRIORITY_TIERS } from "../../domain/priority.js";
import { RECEIPT_STATES } from "../../domain/receipts.js";
import {
  type MessageWebhookBody,
  WEBHOOK_EVENT_TYPES,
  WEBHOOK_TEST_EVENT,
  type WebhookEventType,
  type WebhookTestBody,
} from "../../domain/webhooks.js";

/**
 * The events the service POSTs to webhook endpoints, as the OpenAPI 3.1 document's `webhooks`
 * (docs/webhooks.md). One schema for every message event, its `type` an enum, since they share
 * one shape (the fields an event does not fill are null); each type is its own entry under
 * `webhooks`, saying when it is sent. The schemas are typed against the domain's bodies, so the
 * document cannot drift from what `messageWebhookBody` and `webhookTestBody` build.
 */

const timestamp = z.iso.datetime();

export const messageWebhookEvent = z
  .object({
    type: z.enum(WEBHOOK_EVENT_TYPES),
    timestamp: timestamp.meta({ description: "When the event occurred (UTC)" }),
    data: z.object({
      message_id: z.uuid(),
      organization_id: z.uuid(),
      channel: z.enum(CHANNELS),
      status: z.enum(STATUSES).meta({
        description:
          "The message's status after this event; for a receipt's event (which never changes it), its status when the receipt came",
      }),
      retry_count: z.int().min(0),
      seq: z
        .int()
        .min(1)
        .meta({
          description:
            "The event's position in its message's history: keep the highest seen per `message_id` and " +
            "drop an event that arrives with a lower one",
        }),
      priority: z.enum(PRIORITY_TIERS),
      notification_type: z.string().nullable(),
      provider: z.string().nullable().meta({
        description:
          "`message.succeeded`: the provider that accepted it; a receipt's event: the provider that sent the receipt; with a provider list, `message.retry_scheduled`, `.failed` and `.rejected` after a provider's answer: the provider (account) that gave it",
      }),
      provider_message_id: z.string().nullable(),
      reason: z.string().nullable().meta({
        description:
          "`message.failed`, `message.rejected`: why (e.g. `retries_exhausted`, `recipient_refused`)",
      }),
      error: z
        .object({ class: z.string(), code: z.string() })
        .nullable()
        .meta({ description: "The delivery error of a failed attempt, where there is one" }),
      next_attempt_at: timestamp
        .nullable()
        .meta({ description: "`message.retry_scheduled`: when the next attempt is due" }),
      delivery: z
        .object({
          state: z.enum(RECEIPT_STATES),
          error_code: z.string().nullable().meta({
            description:
              "The provider's error code (Twilio's `ErrorCode`, e.g. `30003`), if the receipt had one",
          }),
          updated_at: timestamp.meta({ description: "When the receipt was recorded" }),
        })
        .nullable()
        .meta({
          description:
            "`message.delivered`, `.undelivered`, `.bounced`, `.complained`: what the provider's receipt said; else null",
        }),
    }),
  })
  .meta({
    id: "MessageWebhookEvent",
    description: "A change of a message. No message text and no recipient: the client has them.",
  }) satisfies z.ZodType<MessageWebhookBody>;

export const webhookTestEvent = z
  .object({
    type: z.literal(WEBHOOK_TEST_EVENT),
    timestamp: timestamp.meta({ description: "When it was sent (UTC)" }),
    data: z.object({ endpoint_id: z.uuid(), organization_id: z.uuid() }),
  })
  .meta({
    id: "WebhookTestEvent",
    description: "Sent by `POST /api/v1/webhooks/endpoints/{id}/test` only",
  }) satisfies z.ZodType<WebhookTestBody>;

// Both ways: a field the domain adds and the schema lacks fails to compile too.
type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
const schemasMatchTheDomain: [
  Same<z.output<typeof messageWebhookEvent>, MessageWebhookBody>,
  Same<z.output<typeof webhookTestEvent>, WebhookTestBody>,
] = [true, true];
void schemasMatchTheDomain;

/** When each event is sent. */
const SENT_WHEN: Record<WebhookEventType | typeof WEBHOOK_TEST_EVENT, string> = {
  "message.accepted": "A message was accepted (the answer of its send was a 202).",
  "message.retry_scheduled":
    "An attempt failed with an error worth retrying; `data.next_attempt_at` says when the next is due.",
  "message.succeeded": "The provider accepted the message (`data.provider`, `data.provider_message_id`).",
  "message.failed":
    "The message will not be delivered: retries spent or disabled, time-to-live over, a permanent error.",
  "message.rejected":
    "The message was refused before or at its delivery (organization inactive, recipient refused, template missing, content erased).",
  "message.delivered":
    "The provider's receipt says the message reached the recipient (SMS: the handset confirmed it). `status` does not change.",
  "message.undelivered":
    "The provider's receipt says the message did not reach the recipient (`data.delivery.error_code` says why: Twilio's `ErrorCode`). `status` does not change.",
  "message.bounced": "The recipient's mail server returned the e-mail for good (a permanent bounce).",
  "message.complained": "The recipient reported the e-mail as spam.",
  "webhook.test": "`POST /api/v1/webhooks/endpoints/{id}/test` was called.",
};

const signatureHeaders = z.object({
  "webhook-id": z.string().meta({
    description:
      "The event's id, the same on every retry and recovery of it (`evt_<message_id>_<seq>`): deduplicate on it",
  }),
  "webhook-timestamp": z.string().meta({ description: "Unix seconds of this attempt" }),
  "webhook-signature": z.string().meta({
    description:
      "`v1,<base64 HMAC-SHA256 of id.timestamp.body>`; two, space-separated, for 24 h after a rotation (Standard Webhooks 1.0)",
  }),
});

/** Adds every event to the document's `webhooks`, keyed by its type. */
export function registerWebhookEvents(
  registry: Pick<OpenAPIHono["openAPIRegistry"], "registerWebhook">,
): void {
  for (const type of [...WEBHOOK_EVENT_TYPES, WEBHOOK_TEST_EVENT] as const) {
    registry.registerWebhook({
      method: "post",
      path: type,
      tags: ["Webhooks"],
      summary: type,
      description: `${SENT_WHEN[type]} POSTed to every enabled endpoint subscribed to \`${type}\`, signed per Standard Webhooks 1.0.`,
      request: {
        headers: signatureHeaders,
        body: {
          required: true,
          content: {
            "application/json": {
              schema: type === WEBHOOK_TEST_EVENT ? webhookTestEvent : messageWebhookEvent,
            },
          },
        },
      },
      responses: {
        200: {
          description:
            "Any 2xx: received. Anything else, a redirect or no answer within 10 s is a failed attempt and " +
            "retried; 410 disables the endpoint; on 429 and 503 `Retry-After` is honoured",
        },
      },
    });
  }
}
