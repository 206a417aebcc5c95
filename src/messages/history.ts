import { z } from "zod";
import { type DeliveryError, FAILURE_CLASSES } from "../domain/delivery-outcome.js";
import {
  FAILED_REASONS,
  type MessageEvent,
  type OutcomeProviders,
  REJECTED_REASONS,
} from "../domain/events.js";
import { NOTIFICATION_TYPES, PRIORITY_TIERS } from "../domain/priority.js";
import { RECEIPT_STATES } from "../domain/receipts.js";
import { SUPPRESSION_REASONS, type SuppressionEntry } from "../domain/suppression.js";
import type { MessageStore } from "../store/message-store.js";

const timestamp = z.iso.datetime().meta({ description: "ISO 8601, UTC" });
const attempt = z
  .int()
  .min(0)
  .meta({ description: "The provider call this is about: 1 for the first; 0 for none" });
const common = {
  seq: z.int().min(1).meta({ description: "1, 2, 3, … in the order the events happened" }),
  retry_count: z.int().min(0),
  occurred_at: timestamp,
};

const providerErrorSchema = z
  .object({
    class: z.enum(FAILURE_CLASSES).meta({
      description:
        "transient: worth retrying; rejected: the provider refused the recipient for good; permanent: the request cannot succeed",
    }),
    code: z.string().meta({ description: "The provider's own error code, or a short slug" }),
    message: z.string().meta({
      description:
        "The service's own words for what happened; never the provider's answer, its address or the recipient",
    }),
  })
  .meta({ id: "ProviderError", description: "What the provider answered to one attempt" });

/** A provider list's words on an outcome (docs/decisions/0046); absent with a single provider. */
const outcomeProvider = z.string().optional().meta({
  description:
    "Only with a provider list: the provider (account) whose answer ended this attempt, e.g. `twilio:backup`; `none` (only in events from before a fix: today no attempt is recorded when no provider can be called) when every provider's circuit breaker was open and none was called",
});
const failovers = z
  .array(
    z
      .object({
        provider: z.string().meta({ description: "The provider (account) left, e.g. `twilio:primary`" }),
        error: providerErrorSchema,
      })
      .meta({ id: "ProviderFailover" }),
  )
  .optional()
  .meta({
    description:
      "Only with a provider list, when this attempt went to other providers first: each, in order, with the error that showed it had not taken the message (a refused connection, a 429, the account's refusal rather than the recipient's), so the attempt moved on to the next",
  });

const suppressionEntry = z
  .object({
    reason: z.enum(SUPPRESSION_REASONS),
    created_at: timestamp.meta({ description: "When the recipient was put on the list" }),
  })
  .meta({
    id: "SuppressionEntryRef",
    description: "The suppression list's entry that kept a recipient out (never the recipient itself)",
  });

/** One entry of a message's history, for the OpenAPI document; {@link toHistoryEntry} is typed by it. */
export const historyEntry = z
  .union([
    z.object({
      ...common,
      type: z.literal("accepted"),
      priority: z.enum(PRIORITY_TIERS),
      notification_type: z.enum(NOTIFICATION_TYPES).nullable(),
      retry_enabled: z.boolean(),
      send_at: timestamp
        .nullable()
        .meta({ description: "A scheduled send: no attempt starts before this; null when sent at once" }),
      expires_at: timestamp.meta({ description: "No attempt starts and no retry is scheduled after this" }),
    }),
    z.object({
      ...common,
      type: z.literal("pending"),
      kind: z.literal("attempt_started").meta({ description: "A worker is about to call the provider" }),
      attempt,
      suppressed: z.array(suppressionEntry).optional().meta({
        description: "Only when some of an e-mail's recipients were left out, being on the suppression list",
      }),
    }),
    z.object({
      ...common,
      type: z.literal("pending"),
      kind: z.literal("retry_scheduled").meta({ description: "The attempt failed transiently" }),
      attempt,
      retry_at: timestamp,
      error: providerErrorSchema,
      provider: outcomeProvider,
      failovers,
    }),
    z.object({
      ...common,
      type: z.literal("success"),
      attempt,
      provider: z.string().meta({
        description: "The provider that accepted it: with a provider list, the account (`twilio:backup`)",
      }),
      provider_message_id: z.string(),
      failovers,
      price: z
        .object({
          amount: z.string().meta({
            description:
              "A decimal number as the provider wrote it; Twilio's are negative, a charge (`-0.00750`)",
          }),
          currency: z.string().meta({ description: "ISO 4217 (`USD`)" }),
        })
        .optional()
        .meta({
          description:
            "Only when the provider said at once what it charges (Twilio: the Message resource's `price` and `price_unit`, most often not known yet when it answers)",
        }),
      segments: z.int().min(1).optional().meta({
        description:
          "Only when the provider said how many segments it counted (Twilio's `num_segments`); the record's `segments` is the service's own count",
      }),
    }),
    z.object({
      ...common,
      type: z.literal("failed"),
      attempt,
      reason: z.enum(FAILED_REASONS),
      error: providerErrorSchema.nullable().meta({ description: "The last attempt's error, if it had one" }),
      provider: outcomeProvider,
      failovers,
    }),
    z.object({
      ...common,
      type: z.literal("rejected"),
      attempt,
      reason: z.enum(REJECTED_REASONS),
      error: providerErrorSchema.nullable().meta({
        description: "Why: the provider's refusal, or (template_*) what was wrong with the e-mail's template",
      }),
      suppression: suppressionEntry.optional().meta({
        description: "Only for `recipient_suppressed`: the entry of the suppression list",
      }),
      provider: outcomeProvider,
      failovers,
    }),
    z.object({
      ...common,
      type: z.literal("receipt").meta({
        description:
          "A provider's delivery receipt that moved the record's `delivery` forward; it never changes `status`",
      }),
      state: z.enum(RECEIPT_STATES),
      error_code: z.string().nullable().meta({ description: "The provider's error code, if it gave one" }),
      provider: z.string(),
      provider_status: z.string().meta({ description: "The provider's own word (Twilio's `MessageStatus`)" }),
      provider_message_id: z.string().nullable(),
    }),
    z.object({
      ...common,
      type: z.literal("delivery_delayed").meta({
        description:
          "A provider reported that it has not delivered the message yet and is still trying (an e-mail's delayed DSN). History only: it changes neither `status` nor `delivery`, and sends no webhook; only the first is recorded, and none after a final receipt",
      }),
      error_code: z
        .string()
        .nullable()
        .meta({ description: "The provider's code (`4.4.1`), if it gave one" }),
      provider: z.string(),
      provider_status: z.string().meta({ description: "The provider's own word (`delayed`)" }),
    }),
  ])
  .meta({
    id: "MessageEvent",
    description: "One change of a message; never its body or recipient (the record has them)",
  });

export type HistoryEntry = z.input<typeof historyEntry>;

/** A stored event as the API shows it: what explains the delivery, without the message's content. */
export function toHistoryEntry(seq: number, event: MessageEvent): HistoryEntry {
  const common = { seq, retry_count: event.retryCount, occurred_at: event.occurredAt };
  switch (event.type) {
    case "accepted": {
      const { priority, notificationType, retryEnabled, sendAt, expiresAt } = event.data;
      return {
        ...common,
        type: "accepted",
        priority,
        notification_type: notificationType,
        retry_enabled: retryEnabled,
        send_at: sendAt ?? null,
        expires_at: expiresAt,
      };
    }
    case "pending": {
      const { data } = event;
      if (data.kind === "attempt_started")
        return {
          ...common,
          type: "pending",
          kind: "attempt_started",
          attempt: data.attempt,
          ...(data.suppressed && { suppressed: data.suppressed.map(suppressionRef) }),
        };
      return {
        ...common,
        type: "pending",
        kind: "retry_scheduled",
        attempt: data.attempt,
        retry_at: data.retryAt,
        error: providerError(data.error),
        ...providersShown(data),
      };
    }
    case "success": {
      const { attempt, provider, providerMessageId, price, segments, failovers } = event.data;
      return {
        ...common,
        type: "success",
        attempt,
        provider,
        provider_message_id: providerMessageId,
        ...(price && { price: { amount: price.amount, currency: price.currency } }),
        ...(segments !== undefined && { segments }),
        ...providersShown({ failovers }),
      };
    }
    case "failed": {
      const { reason, attempt, error } = event.data;
      return {
        ...common,
        type: "failed",
        attempt,
        reason,
        error: error ? providerError(error) : null,
        ...providersShown(event.data),
      };
    }
    case "rejected": {
      const { reason, attempt, error, suppression } = event.data;
      return {
        ...common,
        type: "rejected",
        attempt,
        reason,
        error: error ? providerError(error) : null,
        ...(suppression && { suppression: suppressionRef(suppression) }),
        ...providersShown(event.data),
      };
    }
    case "receipt": {
      const { state, errorCode, provider, providerStatus, providerMessageId } = event.data;
      return {
        ...common,
        type: "receipt",
        state,
        error_code: errorCode,
        provider,
        provider_status: providerStatus,
        provider_message_id: providerMessageId,
      };
    }
    case "delivery_delayed": {
      const { errorCode, provider, providerStatus } = event.data;
      return {
        ...common,
        type: "delivery_delayed",
        error_code: errorCode,
        provider,
        provider_status: providerStatus,
      };
    }
    default: {
      const never: never = event;
      throw new Error(`unknown event ${JSON.stringify(never)}`);
    }
  }
}

function suppressionRef(entry: SuppressionEntry) {
  return { reason: entry.reason, created_at: entry.createdAt };
}

/** A provider list's fields of an outcome event, as recorded (none for a single provider's). */
function providersShown(data: OutcomeProviders) {
  return {
    ...(data.provider !== undefined && { provider: data.provider }),
    ...(data.failovers && {
      failovers: data.failovers.map((failover) => ({
        provider: failover.provider,
        error: providerError(failover.error),
      })),
    }),
  };
}

/** `retryAfterMs` stays out: the event's `retry_at` already shows its effect. */
function providerError(error: DeliveryError) {
  return { class: error.class, code: error.code, message: error.message };
}

/** A message's events in order, or none when the organization has no such message. */
export async function loadHistory(
  store: Pick<MessageStore, "loadEvents">,
  organizationId: string,
  messageId: string,
): Promise<HistoryEntry[]> {
  const stored = await store.loadEvents(organizationId, messageId);
  return stored.map(({ seq, event }) => toHistoryEntry(seq, event));
}
