import { expect } from "vitest";
import {
  type Command,
  type Decision,
  decide,
  type Preparation,
  type Refusal,
} from "../../../src/domain/decide.js";
import type { DeliveryError, DeliveryOutcome } from "../../../src/domain/delivery-outcome.js";
import type {
  FailedReason,
  MessageContent,
  MessageEvent,
  RejectedReason,
  SmsMessageContent,
} from "../../../src/domain/events.js";
import type { RetryPolicy } from "../../../src/domain/retry-policy.js";
import { fold, type MessageState } from "../../../src/domain/state.js";
import type { SuppressionFact } from "../../../src/domain/suppression.js";

/**
 * The domain tests' fixed clock, message, outcomes, events and commands, and the given / when /
 * then helpers: given a history, when a command is decided, then these events (or this refusal).
 */

// ---------------------------------------------------------------------------------------------
// Fixed clock, policy and message
// ---------------------------------------------------------------------------------------------

export const NOW = new Date("2026-01-01T00:00:00Z");
export const SECOND = 1000;
export const MINUTE = 60 * SECOND;
export const HOUR = 60 * MINUTE;
export const POLICY: RetryPolicy = { maxAttempts: 5, baseDelayMs: 1000, maxDelayMs: 60_000 };

/** The instant `offsetMs` after the fixed clock. */
export const at = (offsetMs: number): Date => new Date(NOW.getTime() + offsetMs);
export const iso = (offsetMs: number): string => at(offsetMs).toISOString();

export function content(overrides: Partial<SmsMessageContent> = {}): SmsMessageContent {
  return {
    id: "0b8f2a9e-6a55-4c1e-9b1e-3f0c2d7a1b11",
    organizationId: "org-1",
    productId: "product-1",
    channel: "sms",
    priority: "medium",
    notificationType: null,
    retryEnabled: true,
    recipient: "+2348012345678",
    sender: "ACME",
    body: "Your code is 123456",
    expiresAt: iso(24 * HOUR),
    ...overrides,
  };
}

// ---------------------------------------------------------------------------------------------
// Outcomes
// ---------------------------------------------------------------------------------------------

export const delivered: DeliveryOutcome = { ok: true, provider: "sim", providerMessageId: "SM123" };

export function transient(overrides: Partial<DeliveryError> = {}): DeliveryOutcome {
  return {
    ok: false,
    provider: "sim",
    error: { class: "transient", code: "503", message: "provider unavailable", ...overrides },
  };
}

export const refusedByProvider: DeliveryOutcome = {
  ok: false,
  provider: "sim",
  error: { class: "rejected", code: "21211", message: "invalid 'To' phone number" },
};

export const permanentFailure: DeliveryOutcome = {
  ok: false,
  provider: "sim",
  error: { class: "permanent", code: "20003", message: "authentication failed" },
};

export function errorOf(outcome: DeliveryOutcome): DeliveryError {
  if (outcome.ok) throw new Error("a successful outcome has no error");
  return outcome.error;
}

// ---------------------------------------------------------------------------------------------
// Events (what the history of a message looks like)
// ---------------------------------------------------------------------------------------------

export const ev = {
  accepted: (message: MessageContent = content(), t = 0): MessageEvent => ({
    type: "accepted",
    retryCount: 0,
    occurredAt: iso(t),
    data: message,
  }),
  started: (attempt: number, retryCount: number, t: number): MessageEvent => ({
    type: "pending",
    retryCount,
    occurredAt: iso(t),
    data: { kind: "attempt_started", attempt },
  }),
  scheduled: (
    attempt: number,
    retryCount: number,
    t: number,
    retryAtOffset: number,
    error: DeliveryError = errorOf(transient()),
  ): MessageEvent => ({
    type: "pending",
    retryCount,
    occurredAt: iso(t),
    data: { kind: "retry_scheduled", attempt, error, retryAt: iso(retryAtOffset) },
  }),
  succeeded: (attempt: number, retryCount: number, t: number): MessageEvent => ({
    type: "success",
    retryCount,
    occurredAt: iso(t),
    data: { attempt, provider: "sim", providerMessageId: "SM123" },
  }),
  failed: (
    reason: FailedReason,
    attempt: number,
    retryCount: number,
    t: number,
    error?: DeliveryError,
  ): MessageEvent => ({
    type: "failed",
    retryCount,
    occurredAt: iso(t),
    data: error ? { reason, attempt, error } : { reason, attempt },
  }),
  rejected: (
    reason: RejectedReason,
    attempt: number,
    retryCount: number,
    t: number,
    error?: DeliveryError,
  ): MessageEvent => ({
    type: "rejected",
    retryCount,
    occurredAt: iso(t),
    data: error ? { reason, attempt, error } : { reason, attempt },
  }),
};

/**
 * A message accepted at 0 whose attempts 1..n-1 each failed transiently and whose attempt n is
 * now in flight (10 s between attempts, each retry due 5 s after its failure).
 */
export function historyWithAttemptInFlight(n: number, message: MessageContent = content()): MessageEvent[] {
  const events: MessageEvent[] = [ev.accepted(message, 0), ev.started(1, 0, 1 * SECOND)];
  for (let attempt = 1; attempt < n; attempt++) {
    const failedAt = attempt * 10 * SECOND;
    events.push(ev.scheduled(attempt, attempt, failedAt, failedAt + 5 * SECOND));
    events.push(ev.started(attempt + 1, attempt, failedAt + 5 * SECOND));
  }
  return events;
}

// ---------------------------------------------------------------------------------------------
// Commands
// ---------------------------------------------------------------------------------------------

export interface Knobs {
  policy?: RetryPolicy;
  random?: number;
}

/** What the worker found out before asking to start an attempt. */
export interface Facts {
  organizationActive: boolean;
  preparation?: Preparation;
  suppression?: SuppressionFact;
}

/** An active organization's message, made ready by its channel: nothing stops the attempt. */
export const ACTIVE_AND_READY: Facts = { organizationActive: true, preparation: { ready: true } };

export const cmd = {
  accept: (message: MessageContent = content(), t = 0): Command => ({ type: "accept", message, now: at(t) }),
  start: (
    t: number,
    { policy = POLICY, random = 0 }: Knobs = {},
    facts: Facts = ACTIVE_AND_READY,
  ): Command => ({
    type: "start_attempt",
    now: at(t),
    policy,
    random,
    ...facts,
  }),
  record: (
    attempt: number,
    outcome: DeliveryOutcome,
    t: number,
    { policy = POLICY, random = 0 }: Knobs = {},
  ): Command => ({
    type: "record_outcome",
    attempt,
    outcome,
    now: at(t),
    policy,
    random,
  }),
};

// ---------------------------------------------------------------------------------------------
// given / when / then
// ---------------------------------------------------------------------------------------------

export function given(events: readonly MessageEvent[]) {
  const state = fold(events);
  return {
    state,
    when(command: Command) {
      return then(state, decide(state, command));
    },
  };
}

// Not exported: a module exporting `then` is thenable, and importing it would never resolve.
function then(before: MessageState, decision: Decision) {
  return {
    decision,
    /** The produced events; fails when the command was refused or its events are illegal. */
    events(): MessageEvent[] {
      if (!("events" in decision))
        throw new Error(`expected events, got a refusal: ${JSON.stringify(decision)}`);
      expect(decision.events.length).toBeGreaterThan(0);
      fold(decision.events, before); // throws IllegalTransitionError if decide broke the table
      return decision.events;
    },
    /** The state after the produced events. */
    state(): MessageState {
      return fold(this.events(), before);
    },
    /** The refusal; fails when the command produced events. */
    refused(): Refusal {
      if ("events" in decision)
        throw new Error(`expected a refusal, got events: ${JSON.stringify(decision)}`);
      return decision;
    },
  };
}
