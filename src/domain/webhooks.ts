import type { Channel, MessageEvent, Status } from "./events.js";
import { type PriorityTier, TIME_TO_LIVE_MS } from "./priority.js";
import type { ReceiptState } from "./receipts.js";

/**
 * Status webhooks (issue 16, docs/decisions/0035 and 0036): what an endpoint may subscribe to,
 * where it may point, and what a message event's webhook says. Pure.
 */

/** The events an endpoint may subscribe to (sent once the fan-out of message events lands). */
export const WEBHOOK_EVENT_TYPES = [
  "message.accepted",
  "message.retry_scheduled",
  "message.succeeded",
  "message.failed",
  "message.rejected",
  "message.delivered",
  "message.undelivered",
  "message.bounced",
  "message.complained",
] as const;
export type WebhookEventType = (typeof WEBHOOK_EVENT_TYPES)[number];

/**
 * A message's final events: one per message. An endpoint that takes only these (some of them)
 * has at most one delivery per message, which the worker hands its own dispatcher (decision 0036,
 * "The handoff"; db/migrations/0024_webhook-handoff.sql names the same three).
 */
export const FINAL_WEBHOOK_EVENT_TYPES: readonly WebhookEventType[] = [
  "message.succeeded",
  "message.failed",
  "message.rejected",
];

/**
 * The webhook event a message event is sent as; undefined for the events not sent (an attempt
 * starting, a `sent` receipt: only a receipt's outcome is sent, docs/decisions/0038). Migration 0012's SQL function `webhook_event_type` (the fan-out trigger and recover use it) maps them the same
 * way: change both (a test checks they agree).
 */
export function webhookEventTypeOf(event: MessageEvent): WebhookEventType | undefined {
  switch (event.type) {
    case "accepted":
      return "message.accepted";
    case "success":
      return "message.succeeded";
    case "failed":
      return "message.failed";
    case "rejected":
      return "message.rejected";
    case "pending":
      return event.data.kind === "retry_scheduled" ? "message.retry_scheduled" : undefined;
    case "receipt":
      return event.data.state === "sent" ? undefined : `message.${event.data.state}`;
    case "delivery_delayed":
      // History only: a server still trying is followed by the real outcome, which is sent.
      return undefined;
  }
}

/**
 * The `webhook-id` of a message event: the same for every attempt and every re-send (recover), so
 * a receiver can drop duplicates by it.
 */
export function webhookEventId(messageId: string, seq: number): string {
  return `evt_${messageId}_${seq}`;
}

/**
 * The body of a message event's webhook: `{ type, timestamp, data }`. No message text and no
 * recipient (they may be personal data, and the client has them). `seq` orders one message's
 * events: a receiver keeps the highest it saw and drops older ones that arrive late.
 */
export interface MessageWebhookBody {
  type: WebhookEventType;
  /** The event's `occurred_at` (ISO 8601, UTC). */
  timestamp: string;
  data: {
    message_id: string;
    organization_id: string;
    channel: Channel;
    /** The message's status after this event. */
    status: Status;
    retry_count: number;
    seq: number;
    priority: PriorityTier;
    notification_type: string | null;
    /**
     * Which provider accepted it (`message.succeeded`); with a provider list, also which one
     * answered a failed attempt (`message.retry_scheduled`, `.failed`, `.rejected`); else null.
     */
    provider: string | null;
    provider_message_id: string | null;
    /** `message.failed` / `message.rejected`: why (`FAILED_REASONS`, `REJECTED_REASONS`); else null. */
    reason: string | null;
    /** The delivery error of a failed attempt (`message.retry_scheduled`, `.failed`, `.rejected`), where there is one. */
    error: { class: string; code: string } | null;
    /** `message.retry_scheduled`: when the next attempt is due; else null. */
    next_attempt_at: string | null;
    /**
     * A receipt's events (`message.delivered`, `.undelivered`, `.bounced`, `.complained`): what
     * it said (`state`), its provider's error code and when it was recorded; else null.
     */
    delivery: { state: ReceiptState; error_code: string | null; updated_at: string } | null;
  };
}

/** What of the message a body needs besides its event: the clear columns of its record. */
export interface MessageFacts {
  messageId: string;
  organizationId: string;
  channel: Channel;
  priority: PriorityTier;
  notificationType: string | null;
}

/** A message event's webhook body; undefined for an event that is not sent. */
export function messageWebhookBody(
  message: MessageFacts,
  event: MessageEvent & { seq: number },
): MessageWebhookBody | undefined {
  const type = webhookEventTypeOf(event);
  if (!type) return undefined;
  const data = event.data as {
    provider?: string;
    providerMessageId?: string;
    reason?: string;
    error?: { class: string; code: string };
    retryAt?: string;
  };
  // A receipt names its provider's message id as `providerMessageId` too, and keeps the status.
  const receipt = event.type === "receipt" ? event.data : undefined;
  return {
    type,
    timestamp: event.occurredAt,
    data: {
      message_id: message.messageId,
      organization_id: message.organizationId,
      channel: message.channel,
      status: receipt ? receipt.status : (event.type as Status),
      retry_count: event.retryCount,
      seq: event.seq,
      priority: message.priority,
      notification_type: message.notificationType,
      provider: data.provider ?? null,
      provider_message_id: data.providerMessageId ?? null,
      reason: data.reason ?? null,
      error: data.error ? { class: data.error.class, code: data.error.code } : null,
      next_attempt_at: data.retryAt ?? null,
      delivery: receipt
        ? { state: receipt.state, error_code: receipt.errorCode, updated_at: event.occurredAt }
        : null,
    },
  };
}

/**
 * When a delivery that failed its `attempts`-th attempt is tried again, before jitter: the
 * schedule of the issue (the first attempt is immediate), or undefined when it is given up.
 */
export const WEBHOOK_RETRY_DELAYS_MS: readonly number[] = [
  5_000,
  5 * 60_000,
  30 * 60_000,
  2 * 3_600_000,
  5 * 3_600_000,
  10 * 3_600_000,
  10 * 3_600_000,
];

/**
 * How much a retry's delay varies either way (a fraction of it): ±20 %, so the deliveries that
 * failed together (an endpoint that was down) do not all come back at the same instant.
 */
export const WEBHOOK_RETRY_JITTER = 0.2;

/** The longest `Retry-After` honoured: a longer one waits this long (the schedule's longest delay). */
export const WEBHOOK_MAX_RETRY_AFTER_MS = 10 * 3_600_000;

/** What came of one POST, as far as what happens next depends on it. */
export interface WebhookAttemptResult {
  /** The endpoint's HTTP status; null when none came (time-out, connection error, address refused). */
  statusCode: number | null;
  /** The answer's `Retry-After` header, if it had one. */
  retryAfter?: string | null;
}

/** What happens to a delivery after an attempt. */
export type WebhookNextStep =
  /** A 2xx: delivered. */
  | { step: "delivered" }
  /** A failure with retries left: tried again at `at`. */
  | { step: "retry"; at: Date }
  /** A failure after the schedule's last delay: given up. */
  | { step: "give_up" }
  /** A 410 Gone: the endpoint is disabled (`disabled_reason = 'gone'`) and this delivery given up. */
  | { step: "disable_endpoint" };

/** Whether an endpoint's answer is a success: any 2xx (a 3xx is a failure: redirects are never followed). */
export function isWebhookSuccess(statusCode: number | null): boolean {
  return statusCode !== null && statusCode >= 200 && statusCode < 300;
}

/**
 * What follows the `attemptsMade`-th attempt of a delivery (1 for the first), from its result:
 * - a 2xx is delivered; a 410 disables the endpoint; anything else (another status, a 3xx, a
 *   time-out, a connection error, an address refused) is a failure;
 * - a failure is retried after `delaysMs[attemptsMade - 1]` (the schedule: 5 s, 5 min,
 *   30 min, 2 h, 5 h, 10 h, 10 h), varied by ±{@link WEBHOOK_RETRY_JITTER} with `random()` in [0, 1);
 *   after the last delay it is given up;
 * - a 429 or 503 with a `Retry-After` (seconds or an HTTP date) waits at least that long, at most
 *   {@link WEBHOOK_MAX_RETRY_AFTER_MS}; never less than the schedule says, and it adds no attempt
 *   (one that comes after the last delay is given up all the same).
 * `delaysMs` is the schedule; tests pass a short one.
 */
export function nextWebhookAttempt(
  attemptsMade: number,
  result: WebhookAttemptResult,
  random: () => number,
  now: Date,
  delaysMs: readonly number[] = WEBHOOK_RETRY_DELAYS_MS,
): WebhookNextStep {
  if (isWebhookSuccess(result.statusCode)) return { step: "delivered" };
  if (result.statusCode === 410) return { step: "disable_endpoint" };
  const scheduled = delaysMs[attemptsMade - 1];
  if (scheduled === undefined) return { step: "give_up" };
  let delay = scheduled * (1 + WEBHOOK_RETRY_JITTER * (2 * random() - 1));
  if (result.statusCode === 429 || result.statusCode === 503) {
    const asked = retryAfterMs(result.retryAfter, now);
    if (asked !== undefined) delay = Math.max(delay, Math.min(asked, WEBHOOK_MAX_RETRY_AFTER_MS));
  }
  return { step: "retry", at: new Date(now.getTime() + Math.round(delay)) };
}

/**
 * A `Retry-After` header's wait in milliseconds from `now`: delay-seconds (`120`) or an HTTP date
 * (`Wed, 21 Oct 2026 07:28:00 GMT`; one in the past is 0). Undefined when absent or unreadable.
 */
export function retryAfterMs(header: string | null | undefined, now: Date): number | undefined {
  const value = header?.trim();
  if (!value) return undefined;
  if (/^\d+$/.test(value)) return Number(value) * 1000;
  // An HTTP date is always in GMT (RFC 9110); anything else is not one.
  if (!/GMT$/.test(value)) return undefined;
  const at = Date.parse(value);
  return Number.isNaN(at) ? undefined : Math.max(0, at - now.getTime());
}

/** An endpoint that has failed every attempt for this long is disabled. */
export const WEBHOOK_FAILING_DISABLE_MS = 5 * 24 * 3_600_000;

/** The time-out of one POST to an endpoint. */
export const WEBHOOK_ATTEMPT_TIMEOUT_MS = 10_000;

/**
 * How far back `POST …/{id}/recover` may reach: beyond the 5 days of failures that disable an
 * endpoint, two days to notice and re-enable it.
 */
export const WEBHOOK_RECOVER_MAX_AGE_MS = 7 * 24 * 3_600_000;

/** Events one recover call queues at most; the answer then says where to go on from. */
export const WEBHOOK_RECOVER_MAX_EVENTS = 100_000;

/**
 * How long before `since` a message may have been accepted and still have an event since: the
 * longest time-to-live of a tier (no attempt starts later), plus a day for a final event recorded
 * late (a message whose time-to-live ran out while every worker was down gets its `failed` when
 * one comes back). Recover looks at the messages accepted since `since` minus this.
 */
export const WEBHOOK_RECOVER_MESSAGE_LOOKBACK_MS =
  Math.max(...Object.values(TIME_TO_LIVE_MS)) + 24 * 3_600_000;

/** Why `since` may not start a recovery at `now`, or undefined when it may. */
export function recoverSinceProblem(since: Date, now: Date): string | undefined {
  if (since.getTime() > now.getTime()) return "since: must not be in the future";
  if (now.getTime() - since.getTime() > WEBHOOK_RECOVER_MAX_AGE_MS) {
    return `since: must be at most ${WEBHOOK_RECOVER_MAX_AGE_MS / (24 * 3_600_000)} days ago`;
  }
  return undefined;
}

/** The event `POST …/{id}/test` sends, whatever the endpoint subscribes to. */
export const WEBHOOK_TEST_EVENT = "webhook.test";

/** The body of the `webhook.test` event: which endpoint of which organization it tests. */
export interface WebhookTestBody {
  type: typeof WEBHOOK_TEST_EVENT;
  /** When it was sent (ISO 8601, UTC). */
  timestamp: string;
  data: { endpoint_id: string; organization_id: string };
}

export function webhookTestBody(
  endpoint: { id: string; organizationId: string },
  now: Date,
): WebhookTestBody {
  return {
    type: WEBHOOK_TEST_EVENT,
    timestamp: now.toISOString(),
    data: { endpoint_id: endpoint.id, organization_id: endpoint.organizationId },
  };
}

/** Endpoints one organization may have; one more is a 409. */
export const MAX_WEBHOOK_ENDPOINTS_PER_ORGANIZATION = 10;

/** How long the secret a rotation replaces keeps signing beside the new one. */
export const PREVIOUS_SECRET_LIFETIME_MS = 24 * 60 * 60 * 1000;

export const MAX_WEBHOOK_URL_LENGTH = 2048;

/**
 * Why `url` may not be an endpoint, or undefined when it may. HTTPS anywhere; plain HTTP only to a
 * host of `allowedHttpHosts` (WEBHOOK_ALLOWED_HOSTS: `host`, `host:port` or `*.suffix`). Which
 * addresses may be connected to is decided when connecting (the outbound guard), not here.
 */
export function webhookUrlProblem(url: URL, allowedHttpHosts: readonly string[]): string | undefined {
  if (url.protocol !== "https:" && url.protocol !== "http:") return "must be an https:// URL";
  if (url.username !== "" || url.password !== "") return "must not carry a user name or password";
  if (url.hash !== "") return "must not have a #fragment";
  if (url.protocol === "http:" && !httpHostAllowed(url, allowedHttpHosts)) {
    return `must be an https:// URL (plain http:// only to hosts WEBHOOK_ALLOWED_HOSTS names; ${url.host} is not one)`;
  }
  return undefined;
}

function httpHostAllowed(url: URL, allowed: readonly string[]): boolean {
  const hostname = url.hostname.toLowerCase();
  const host = url.host.toLowerCase();
  return allowed.some((pattern) => {
    if (pattern.startsWith("*.")) return hostname.endsWith(pattern.slice(1));
    return pattern.includes(":") ? pattern === host : pattern === hostname;
  });
}
