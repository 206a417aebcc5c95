import { recordDelay, recordReceipt } from "./decide-receipt.js";
import type { DeliveryError, DeliveryOutcome } from "./delivery-outcome.js";
import type {
  FailedReason,
  MessageContent,
  MessageEvent,
  OutcomeProviders,
  RejectedReason,
  Status,
} from "./events.js";
import type { DeliveryDelay, Receipt } from "./receipts.js";
import { type RetryPolicy, retryDelayMs } from "./retry-policy.js";
import { evolve, isTerminal, type MessageState } from "./state.js";
import type { SuppressionEntry, SuppressionFact } from "./suppression.js";

/**
 * The rules that decide which events a command produces in a state. Pure: no I/O, no clock, no
 * randomness of its own; the caller gathers the facts and passes them in the command.
 */

export type Command =
  | { type: "accept"; message: MessageContent; now: Date }
  /**
   * A delivery job wants the next attempt to start. The worker passes the facts, the domain
   * decides: reject, expire, wait, ask for the preparation, or start. Every rejection before a
   * provider call is decided here; a new pre-send check becomes a fact of this command.
   */
  | {
      type: "start_attempt";
      now: Date;
      policy: RetryPolicy;
      random: number;
      /**
       * Whether the message's organization is active now. Only a message not yet attempted is
       * rejected for it; one already being delivered goes on with its retries.
       */
      organizationActive: boolean;
      /**
       * The suppression list's entries for the message's recipients, when it has any: all of them
       * suppressed rejects the message (`recipient_suppressed`); some (an e-mail's) are left out of
       * the attempt, which says so.
       */
      suppression?: SuppressionFact;
      /**
       * The channel's preparation of the message for this attempt. Preparing is I/O (a template
       * render), so the first ask goes without it and is answered `preparation_needed` only when
       * an attempt would really start; the caller prepares and asks again with the same facts.
       */
      preparation?: Preparation;
    }
  | {
      type: "record_outcome";
      attempt: number;
      outcome: DeliveryOutcome;
      now: Date;
      policy: RetryPolicy;
      random: number;
    }
  /**
   * A provider's receipt (src/domain/receipts.ts): in any status after `accepted`, final ones
   * included. One that does not move the delivery forward (a duplicate, a late `sent`) decides
   * no events: nothing is appended.
   */
  | { type: "record_receipt"; receipt: Receipt; now: Date }
  /**
   * A provider still trying (an e-mail's delayed DSN): history only, in any status after
   * `accepted`; only the first, and none after a final receipt (the others decide no events).
   */
  | { type: "record_delay"; delay: DeliveryDelay; now: Date }
  /**
   * The client cancels the message (`POST /api/v1/messages/{id}/cancel`): only before its first
   * attempt has started. Against a worker starting that attempt at the same instant, the event
   * sequence decides: both append the message's next event, and the second to commit is refused.
   */
  | { type: "cancel"; now: Date };

/**
 * What the channel answered when asked to make the message ready for its provider: ready, or
 * never sendable (an e-mail whose template is missing or does not render).
 */
export type Preparation = { ready: true } | { ready: false; reason: RejectedReason; error: DeliveryError };

/**
 * Why a command produced no events; the caller decides what that means (usually: nothing to do).
 * `preparation_needed`: the attempt can start once the message is prepared; ask again with it.
 */
export type Refusal =
  | { refused: "already_final"; status: Status }
  | { refused: "not_due"; dueAt: string }
  | { refused: "preparation_needed" }
  | { refused: "illegal"; reason: string };

export type Decision = { events: MessageEvent[] } | Refusal;

/** Decides which events a command produces in a state. Never produces an illegal transition. */
export function decide(state: MessageState, command: Command): Decision {
  if (command.type === "record_receipt") return recordReceipt(state, command.receipt, command.now);
  if (command.type === "record_delay") return recordDelay(state, command.delay, command.now);
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
    case "start_attempt":
      return startAttempt(state, command);
    case "cancel":
      if (state.status !== "accepted")
        return { refused: "illegal", reason: `the first attempt has started (status ${state.status})` };
      return rejectBeforeSend(state, "canceled", undefined, command.now);
    case "record_outcome":
      return recordOutcome(state, command);
    default: {
      const never: never = command;
      throw new Error(`unknown command ${JSON.stringify(never)}`);
    }
  }
}

type StartAttempt = Extract<Command, { type: "start_attempt" }>;

/**
 * The checks before an attempt, in this order: a scheduled message waits for its `send_at`
 * (nothing else is looked at before it); an organization deactivated since acceptance rejects the
 * message; then the attempt itself is decided (an expired message fails, a retry not
 * yet due waits, an interrupted attempt is counted); only an attempt that would really start
 * needs the preparation, and content that can never be sent is rejected before it is counted.
 */
function startAttempt(state: MessageState, command: StartAttempt): Decision {
  if (state.status !== "accepted" && state.status !== "pending")
    return { refused: "illegal", reason: `cannot start an attempt on a ${state.status} message` };
  const { sendAt } = state.message;
  if (state.status === "accepted" && sendAt !== undefined && command.now.getTime() < Date.parse(sendAt))
    return { refused: "not_due", dueAt: sendAt };
  if (state.status === "accepted" && !command.organizationActive)
    return rejectBeforeSend(state, "organization_inactive", undefined, command.now);
  const { suppression } = command;
  const [first] = suppression?.entries ?? [];
  if (first && suppression?.everyRecipient) {
    return rejectBeforeSend(state, "recipient_suppressed", suppressedError(first), command.now, first);
  }
  const next = nextAttempt(state, command);
  if (!("events" in next) || !startsAnAttempt(next.events)) return next;
  const { preparation } = command;
  if (!preparation) return { refused: "preparation_needed" };
  // Rejected from the state as it was: the attempt that could not start is not counted, nor is
  // an interrupted one it would have followed.
  if (!preparation.ready) return rejectBeforeSend(state, preparation.reason, preparation.error, command.now);
  return first ? withSuppressed(next.events, suppression?.entries ?? []) : next;
}

/** The error a suppressed recipient's rejection records: which entry, never the recipient. */
function suppressedError(entry: SuppressionEntry): DeliveryError {
  return {
    class: "rejected",
    code: "recipient_suppressed",
    message: `the recipient is on the organization's suppression list (reason ${entry.reason}, since ${entry.createdAt})`,
  };
}

/** The attempt's start names the entries whose recipients it leaves out. */
function withSuppressed(events: MessageEvent[], entries: readonly SuppressionEntry[]): Decision {
  return {
    events: events.map((event) =>
      event.type === "pending" && event.data.kind === "attempt_started"
        ? { ...event, data: { ...event.data, suppressed: [...entries] } }
        : event,
    ),
  };
}

/** Whether events end with an attempt in flight (rather than ending the message). */
export function startsAnAttempt(events: readonly MessageEvent[]): boolean {
  const last = events.at(-1);
  return last?.type === "pending" && last.data.kind === "attempt_started";
}

function rejectBeforeSend(
  state: Extract<MessageState, { status: "accepted" | "pending" }>,
  reason: RejectedReason,
  error: DeliveryError | undefined,
  now: Date,
  suppression?: SuppressionEntry,
): Decision {
  return {
    events: [
      {
        type: "rejected",
        retryCount: state.retryCount,
        occurredAt: now.toISOString(),
        data: {
          reason,
          attempt: state.attempts,
          ...(error && { error }),
          ...(suppression && { suppression }),
        },
      },
    ],
  };
}

/** The events of the next attempt, preparation aside: started, or the message ended or not due. */
function nextAttempt(state: MessageState, command: StartAttempt): Decision {
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
    const next = nextAttempt(evolve(state, retryNow), command);
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
  const providers = providersOf(outcome);
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
            // Only when the provider said: the events of the others keep their shape.
            ...(outcome.price && { price: outcome.price }),
            ...(outcome.segments !== undefined && { segments: outcome.segments }),
            ...(providers.failovers && { failovers: providers.failovers }),
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
            data: { reason: "recipient_refused", attempt: command.attempt, error, ...providers },
          },
        ],
      };
    case "permanent":
      return {
        events: [
          {
            type: "failed",
            ...base,
            data: { reason: "permanent_error", attempt: command.attempt, error, ...providers },
          },
        ],
      };
    case "transient": {
      const fail = (reason: FailedReason): Decision => ({
        events: [
          { type: "failed", ...base, data: { reason, attempt: command.attempt, error, ...providers } },
        ],
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
              ...providers,
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

/**
 * What an outcome of a provider list puts in its event (docs/decisions/0046): a failure's
 * provider, and the providers the attempt left first when there were any. Nothing for a single
 * provider's outcome, whose events keep their shape.
 */
function providersOf(outcome: DeliveryOutcome): OutcomeProviders {
  if (outcome.failovers === undefined) return {};
  const failovers =
    outcome.failovers.length > 0
      ? { failovers: outcome.failovers.map(({ provider, error }) => ({ provider, error })) }
      : {};
  return outcome.ok ? failovers : { provider: outcome.provider, ...failovers };
}
