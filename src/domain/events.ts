import type { DeliveryError, Price, ProviderFailover } from "./delivery-outcome.js";
import type { NotificationType, PriorityTier } from "./priority.js";
import type { DelayData, ReceiptData } from "./receipts.js";
import type { SuppressionEntry } from "./suppression.js";

/**
 * What a message's life is made of: its channels and statuses, the transition table, the content
 * fixed at acceptance and the events recorded after it. Timestamps are ISO 8601 strings so
 * events are plain JSON.
 */

export const CHANNELS = ["email", "sms", "push"] as const;
export type Channel = (typeof CHANNELS)[number];

export const STATUSES = ["accepted", "pending", "success", "failed", "rejected"] as const;
export type Status = (typeof STATUSES)[number];

/**
 * What an event may be: a status it moves its message to, `receipt` (a provider's word on what
 * reached the recipient, src/domain/receipts.ts), which never changes the status, or
 * `delivery_delayed` (a provider's word that it is still trying: an e-mail's delayed DSN), history
 * only: it changes neither the status nor the delivery.
 */
export const EVENT_TYPES = [...STATUSES, "receipt", "delivery_delayed"] as const;
export type EventType = (typeof EVENT_TYPES)[number];

/**
 * The design's transition table. Anything not listed is illegal and never written. A receipt (and
 * a delay) is allowed in every status after `accepted`: it may come before our own `success` is
 * recorded.
 */
export const TRANSITIONS: Readonly<Record<Status | "initial", readonly EventType[]>> = {
  initial: ["accepted"],
  accepted: ["pending", "rejected", "receipt", "delivery_delayed"],
  pending: ["pending", "success", "rejected", "failed", "receipt", "delivery_delayed"],
  success: ["receipt", "delivery_delayed"],
  failed: ["receipt", "delivery_delayed"],
  rejected: ["receipt", "delivery_delayed"],
};

export const TERMINAL_STATUSES: readonly Status[] = ["success", "failed", "rejected"];

interface CommonContent {
  id: string;
  organizationId: string;
  productId: string;
  priority: PriorityTier;
  notificationType: NotificationType | null;
  retryEnabled: boolean;
  /** E.164 number (SMS), the `to` addresses (e-mail), the subscription's endpoint (push). */
  recipient: string;
  /** Sender id (SMS), `from_email` (e-mail), the VAPID subject (push). */
  sender: string;
  /**
   * A scheduled send's `send_at`: no attempt starts before it (src/domain/schedule.ts). Absent on
   * a message sent at once (and on every message accepted before scheduling existed).
   */
  sendAt?: string;
  /** After this instant no attempt starts and no retry is scheduled (the tier's time-to-live from `sendAt`, or from acceptance). */
  expiresAt: string;
}

/**
 * What each channel's messages carry besides the common fields, keyed by channel name. Each
 * channel declares its own entry in its folder (`src/channels/<name>/content.ts` augments this
 * interface), so the domain names no channel's content and imports nothing from the channels
 * (the code of a channel whose entry is missing does not compile: its content has no fields).
 */
// biome-ignore lint/suspicious/noEmptyInterface: the channels' content.ts files fill it in.
export interface ChannelContents {}

/** Everything fixed at acceptance. Timestamps are ISO 8601 strings so events are plain JSON. */
export type MessageContent = {
  [C in Channel]: CommonContent & { channel: C } & ChannelContents[C];
}[Channel];
export type SmsMessageContent = Extract<MessageContent, { channel: "sms" }>;

export const FAILED_REASONS = [
  "retries_exhausted",
  "retries_disabled",
  "ttl_expired",
  "permanent_error",
  "outcome_unknown",
] as const;
export type FailedReason = (typeof FAILED_REASONS)[number];
export const REJECTED_REASONS = [
  "organization_inactive",
  "recipient_refused",
  "template_not_found",
  "template_render_failed",
  "content_erased",
  "recipient_suppressed",
  "canceled",
] as const;
export type RejectedReason = (typeof REJECTED_REASONS)[number];

/**
 * Which providers a failed attempt went through, on its `retry_scheduled`, `failed` or `rejected`
 * event, when the channel sends through a provider list (docs/decisions/0046): the provider whose
 * answer ended the attempt (`none` when every provider's breaker was open), and those it left
 * first. Absent on the events of a single provider (it is the only one) and on events from before.
 */
/** The `provider` of an attempt that called none: every provider's circuit breaker was open. */
export const NO_PROVIDER = "none";

export interface OutcomeProviders {
  provider?: string;
  failovers?: ProviderFailover[];
}

export type MessageEvent =
  | { type: "accepted"; retryCount: 0; occurredAt: string; data: MessageContent }
  | {
      type: "pending";
      retryCount: number;
      occurredAt: string;
      data:
        | {
            kind: "attempt_started";
            attempt: number;
            /** The e-mail's recipients left out of this attempt, being on the suppression list. */
            suppressed?: SuppressionEntry[];
          }
        | ({
            kind: "retry_scheduled";
            attempt: number;
            error: DeliveryError;
            retryAt: string;
          } & OutcomeProviders);
    }
  | {
      type: "success";
      retryCount: number;
      occurredAt: string;
      data: {
        attempt: number;
        provider: string;
        providerMessageId: string;
        /** What the provider charges, when it said at once (Twilio often says only later). */
        price?: Price;
        /** How many segments the provider counted, when it said (an SMS through Twilio). */
        segments?: number;
        /** Through a provider list: the providers the attempt left before this one, when any. */
        failovers?: ProviderFailover[];
      };
    }
  | {
      type: "failed";
      retryCount: number;
      occurredAt: string;
      data: { reason: FailedReason; attempt: number; error?: DeliveryError } & OutcomeProviders;
    }
  | {
      type: "rejected";
      retryCount: number;
      occurredAt: string;
      data: {
        reason: RejectedReason;
        attempt: number;
        error?: DeliveryError;
        /** `recipient_suppressed`: the suppression list's entry (the first, for an e-mail). */
        suppression?: SuppressionEntry;
      } & OutcomeProviders;
    }
  | {
      type: "receipt";
      retryCount: number;
      occurredAt: string;
      /** `status`: the message's when the receipt came (a receipt never changes it). */
      data: ReceiptData & { status: Status };
    }
  | {
      type: "delivery_delayed";
      retryCount: number;
      occurredAt: string;
      /** `status`: the message's when the delay was reported (it never changes it). */
      data: DelayData & { status: Status };
    };
