import type { EmailTemplateFields } from "../channels/email/content.js";
import type { PushContent } from "../channels/push/content.js";
import type { DeliveryError, DeliveryOutcome } from "./delivery-outcome.js";
import type { NotificationType, PriorityTier } from "./priority.js";
import { type RetryPolicy, retryDelayMs } from "./retry-policy.js";

/**
 * A message's life as events, the state folded from them (`evolve`) and the rules that decide
 * which events a command produces (`decide`). Pure: no I/O, no clock, no randomness of its own.
 */

export const CHANNELS = ["email", "sms", "push"] as const;
export type Channel = (typeof CHANNELS)[number];

export const STATUSES = ["accepted", "pending", "success", "failed", "rejected"] as const;
export type Status = (typeof STATUSES)[number];

/** The design's transition table. Anything not listed is illegal and never written. */
export const TRANSITIONS: Readonly<Record<Status | "initial", readonly Status[]>> = {
  initial: ["accepted"],
  accepted: ["pending", "rejected"],
  pending: ["pending", "success", "rejected", "failed"],
  success: [],
  failed: [],
  rejected: [],
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
  /** After this instant no attempt starts and no retry is scheduled. */
  expiresAt: string;
}

/** Everything fixed at acceptance. Timestamps are ISO 8601 strings so events are plain JSON. */
export type MessageContent =
  | (CommonContent & { channel: "sms"; body: string })
  | (CommonContent & { channel: "email"; email: EmailTemplateFields })
  | (CommonContent & { channel: "push"; push: PushContent });
export type SmsMessageContent = Extract<MessageContent, { channel: "sms" }>;
export type EmailMessageContent = Extract<MessageContent, { channel: "email" }>;
export type PushMessageContent = Extract<MessageContent, { channel: "push" }>;

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
] as const;
export type RejectedReason = (typeof REJECTED_REASONS)[number];

export type MessageEvent =
  | { type: "accepted"; retryCount: 0; occurredAt: string; data: MessageContent }
  | {
      type: "pending";
      retryCount: number;
      occurredAt: string;
      data:
        | { kind: "attempt_started"; attempt: number }
        | { kind: "retry_scheduled"; attempt: number; error: DeliveryError; retryAt: string };
    }
  | {
      type: "success";
      retryCount: number;
      occurredAt: string;
      data: { attempt: number; provider: string; providerMessageId: string };
    }
  | {
      type: "failed";
      retryCount: number;
      occurredAt: string;
      data: { reason: FailedReason; attempt: number; error?: DeliveryError };
    }
  | {
      type: "rejected";
      retryCount: number;
      occurredAt: string;
      data: { reason: RejectedReason; attempt: number; error?: DeliveryError };
    };

interface Known {
  message: MessageContent;
  /** Number of events folded so far; the next event gets sequence number `version + 1`. */
  version: number;
  acceptedAt: string;
  updatedAt: string;
  retryCount: number;
  /** Delivery attempts started so far. */
  attempts: number;
}

export type MessageState =
  | { status: "initial"; version: 0 }
  | (Known & { status: "accepted" })
  | (Known & { status: "pending"; attemptInFlight: boolean; nextAttemptAt: string | null })
  | (Known & { status: "success"; deliveredAt: string })
  | (Known & { status: "failed"; reason: FailedReason })
  | (Known & { status: "rejected"; reason: RejectedReason });

export const initialState: MessageState = { status: "initial", version: 0 };

export class IllegalTransitionError extends Error {
  constructor(
    readonly from: MessageState["status"],
    readonly to: Status,
  ) {
    super(`illegal transition ${from} -> ${to}`);
  }
}

export function isTerminal(status: MessageState["status"]): boolean {
  return (TERMINAL_STATUSES as readonly string[]).includes(status);
}

/** Folds one event into the state. Throws on an event the transition table does not allow. */
export function evolve(state: MessageState, event: MessageEvent): MessageState {
  if (!TRANSITIONS[state.status].includes(event.type))
    throw new IllegalTransitionError(state.status, event.type);
  if (event.type === "accepted") {
    return {
      status: "accepted",
      message: event.data,
      version: state.version + 1,
      acceptedAt: event.occurredAt,
      updatedAt: event.occurredAt,
      retryCount: 0,
      attempts: 0,
    };
  }
  if (state.status === "initial") throw new IllegalTransitionError(state.status, event.type);
  const known: Known = {
    message: state.message,
    version: state.version + 1,
    acceptedAt: state.acceptedAt,
    updatedAt: event.occurredAt,
    retryCount: event.retryCount,
    attempts:
      event.type === "pending" && event.data.kind === "attempt_started" ? event.data.attempt : state.attempts,
  };
  // `known` is spread last: V8 builds `{ ...a, b }` far slower than `{ b, ...a }` (see accept.ts).
  switch (event.type) {
    case "pending":
      return event.data.kind === "attempt_started"
        ? { status: "pending", attemptInFlight: true, nextAttemptAt: null, ...known }
        : { status: "pending", attemptInFlight: false, nextAttemptAt: event.data.retryAt, ...known };
    case "success":
      return { status: "success", deliveredAt: event.occurredAt, ...known };
    case "failed":
      return { status: "failed", reason: event.data.reason, ...known };
    case "rejected":
      return { status: "rejected", reason: event.data.reason, ...known };
    default: {
      const never: never = event;
      throw new Error(`unknown event ${JSON.stringify(never)}`);
    }
  }
}

export function fold(events: readonly MessageEvent[], from: MessageState = initialState): MessageState {
  return events.reduce(evolve, from);
}

export type Command =
  | { type: "accept"; message: MessageContent; now: Date }
  /**
   * A check before the provider call refused the message: its organization was deactivated, or
   * (e-mail) its template is missing or cannot be rendered. `error` says why, for the history.
   */
  | { type: "reject_before_send"; reason: RejectedReason; error?: DeliveryError; now: Date }
  | { type: "start_attempt"; now: Date; policy: RetryPolicy; random: number }
  | {
      type: "record_outcome";
      attempt: number;
      outcome: DeliveryOutcome;
      now: Date;
      policy: RetryPolicy;
      random: number;
    };

/** Why a command produced no events; the caller decides what that means (usually: nothing to do). */
export type Refusal =
  | { refused: "already_final"; status: Status }
  | { refused: "not_due"; dueAt: string }
  | { refused: "illegal"; reason: string };

export type Decision = { events: MessageEvent[] } | Refusal;

/** Decides which events a command produces in a state. Never produces an illegal transition. */
export function decide(state: MessageState, command: Command): Decision {
  if (state.status !== "initial" && isTerminal(state.status)) {
    return { refused: "already_final", status: state.status as Status };
  }
  switch (command.type) {
    case "accept":
      if (state.status !== "initial") return { refused: "illegal", reason: "message already accepted" };
      return {
        events: [
          { type: "accepted", retryCount: 0, occurredAt: command.now.toISOString(), data: command.message },
        ],
      };
    case "reject_before_send": {
      if (state.status !== "accepted" && state.status !== "pending")
        return { refused: "illegal", reason: `cannot reject a ${state.status} message before sending` };
      const { reason, error } = command;
      return {
        events: [
          {
            type: "rejected",
            retryCount: state.retryCount,
            occurredAt: command.now.toISOString(),
            data: { reason, attempt: state.attempts, ...(error && { error }) },
          },
        ],
      };
    }
    case "start_attempt":
      return startAttempt(state, command);
    case "record_outcome":
      return recordOutcome(state, command);
    default: {
      const never: never = command;
      throw new Error(`unknown command ${JSON.stringify(never)}`);
    }
  }
}

function startAttempt(state: MessageState, command: Extract<Command, { type: "start_attempt" }>): Decision {
  const now = command.now.toISOString();
  if (state.status === "accepted") {
    const started: MessageEvent = {
      type: "pending",
      retryCount: 0,
      occurredAt: now,
      data: { kind: "attempt_started", attempt: 1 },
    };
    if (command.now.getTime() >= Date.parse(state.message.expiresAt)) {
      return {
        events: [
          started,
          { type: "failed", retryCount: 0, occurredAt: now, data: { reason: "ttl_expired", attempt: 1 } },
        ],
      };
    }
    return { events: [started] };
  }
  if (state.status !== "pending")
    return { refused: "illegal", reason: `cannot start an attempt on a ${state.status} message` };

  if (state.attemptInFlight) {
    // The previous attempt started but its outcome was never recorded (the worker died, or Redis
    // lost the job). The provider may have sent it: count it as an attempt whose result is unknown,
    // so the duplicate the next attempt may cause is visible in the events.
    const interrupted: DeliveryError = {
      class: "transient",
      code: "attempt_interrupted",
      message: "the previous attempt ended without a recorded outcome",
    };
    // Retry at once (no backoff): the interrupted attempt already waited its turn.
    const afterInterruption = recordOutcome(state, {
      type: "record_outcome",
      attempt: state.attempts,
      outcome: { ok: false, provider: "unknown", error: interrupted },
      now: command.now,
      policy: { ...command.policy, baseDelayMs: 0 },
      random: 0,
    });
    if (!("events" in afterInterruption)) return afterInterruption;
    const [retryNow] = afterInterruption.events;
    if (retryNow?.type !== "pending") return afterInterruption; // failed: no further attempt
    const next = startAttempt(evolve(state, retryNow), command);
    return "events" in next ? { events: [retryNow, ...next.events] } : next;
  }

  if (command.now.getTime() >= Date.parse(state.message.expiresAt)) {
    return {
      events: [
        {
          type: "failed",
          retryCount: state.retryCount,
          occurredAt: now,
          data: { reason: "ttl_expired", attempt: state.attempts },
        },
      ],
    };
  }
  if (state.nextAttemptAt && command.now.getTime() < Date.parse(state.nextAttemptAt)) {
    return { refused: "not_due", dueAt: state.nextAttemptAt };
  }
  return {
    events: [
      {
        type: "pending",
        retryCount: state.retryCount,
        occurredAt: now,
        data: { kind: "attempt_started", attempt: state.attempts + 1 },
      },
    ],
  };
}

function recordOutcome(state: MessageState, command: Extract<Command, { type: "record_outcome" }>): Decision {
  if (state.status !== "pending" || !state.attemptInFlight || state.attempts !== command.attempt) {
    return { refused: "illegal", reason: `attempt ${command.attempt} is not in flight` };
  }
  const now = command.now.toISOString();
  const { outcome } = command;
  const base = { retryCount: state.retryCount, occurredAt: now };
  if (outcome.ok) {
    return {
      events: [
        {
          type: "success",
          ...base,
          data: {
            attempt: command.attempt,
            provider: outcome.provider,
            providerMessageId: outcome.providerMessageId,
          },
        },
      ],
    };
  }
  const { error } = outcome;
  switch (error.class) {
    case "rejected":
      return {
        events: [
          {
            type: "rejected",
            ...base,
            data: { reason: "recipient_refused", attempt: command.attempt, error },
          },
        ],
      };
    case "permanent":
      return {
        events: [
          { type: "failed", ...base, data: { reason: "permanent_error", attempt: command.attempt, error } },
        ],
      };
    case "transient": {
      const fail = (reason: FailedReason): Decision => ({
        events: [{ type: "failed", ...base, data: { reason, attempt: command.attempt, error } }],
      });
      // Out of attempts after an interruption, the provider may well have sent it: say so.
      const interrupted = error.code === "attempt_interrupted";
      if (!state.message.retryEnabled) return fail(interrupted ? "outcome_unknown" : "retries_disabled");
      if (state.attempts >= command.policy.maxAttempts)
        return fail(interrupted ? "outcome_unknown" : "retries_exhausted");
      const delay = retryDelayMs(command.policy, state.retryCount + 1, command.random, error.retryAfterMs);
      const retryAt = command.now.getTime() + delay;
      if (retryAt >= Date.parse(state.message.expiresAt)) return fail("ttl_expired");
      return {
        events: [
          {
            type: "pending",
            retryCount: state.retryCount + 1,
            occurredAt: now,
            data: {
              kind: "retry_scheduled",
              attempt: command.attempt,
              error,
              retryAt: new Date(retryAt).toISOString(),
            },
          },
        ],
      };
    }
    default: {
      const never: never = error.class;
      throw new Error(`unknown failure class ${String(never)}`);
    }
  }
}
