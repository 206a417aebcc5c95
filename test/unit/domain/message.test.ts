import { describe, expect, it } from "vitest";
import { type Command, decide } from "../../../src/domain/decide.js";
import type { DeliveryOutcome } from "../../../src/domain/delivery-outcome.js";
import {
  type MessageContent,
  type MessageEvent,
  STATUSES,
  type Status,
  TERMINAL_STATUSES,
  TRANSITIONS,
} from "../../../src/domain/events.js";
import type { RetryPolicy } from "../../../src/domain/retry-policy.js";
import {
  evolve,
  fold,
  IllegalTransitionError,
  initialState,
  isTerminal,
  type MessageState,
} from "../../../src/domain/state.js";
import {
  at,
  cmd,
  content,
  delivered,
  errorOf,
  ev,
  type Facts,
  given,
  HOUR,
  historyWithAttemptInFlight,
  iso,
  type Knobs,
  MINUTE,
  NOW,
  POLICY,
  permanentFailure,
  refusedByProvider,
  SECOND,
  transient,
} from "./given.js";

// =============================================================================================
// The transition table
// =============================================================================================

type From = Status | "initial";
const FROM: readonly From[] = ["initial", ...STATUSES];

/** A history ending in each status. */
const HISTORY_ENDING_IN: Record<From, MessageEvent[]> = {
  initial: [],
  accepted: [ev.accepted()],
  pending: [ev.accepted(), ev.started(1, 0, 10)],
  success: [ev.accepted(), ev.started(1, 0, 10), ev.succeeded(1, 0, 20)],
  failed: [ev.accepted(), ev.started(1, 0, 10), ev.failed("permanent_error", 1, 0, 20)],
  rejected: [ev.accepted(), ev.rejected("organization_inactive", 0, 0, 10)],
};

/** One event of each type. */
const EVENT_OF_TYPE: Record<Status, MessageEvent> = {
  accepted: ev.accepted(),
  pending: ev.started(2, 0, 30),
  success: ev.succeeded(1, 0, 30),
  failed: ev.failed("retries_exhausted", 1, 0, 30),
  rejected: ev.rejected("recipient_refused", 1, 0, 30),
};

const ALL_PAIRS = FROM.flatMap((from) => STATUSES.map((to) => ({ from, to })));
const LEGAL_PAIRS = ALL_PAIRS.filter(({ from, to }) => TRANSITIONS[from].includes(to));
const ILLEGAL_PAIRS = ALL_PAIRS.filter(({ from, to }) => !TRANSITIONS[from].includes(to));

describe("the transition table", () => {
  it("is the design's table: 7 legal transitions, success/failed/rejected terminal", () => {
    // Besides the statuses, a receipt and a delay (which keep the status) in every one after `accepted`.
    expect(TRANSITIONS).toEqual({
      initial: ["accepted"],
      accepted: ["pending", "rejected", "receipt", "delivery_delayed"],
      pending: ["pending", "success", "rejected", "failed", "receipt", "delivery_delayed"],
      success: ["receipt", "delivery_delayed"],
      failed: ["receipt", "delivery_delayed"],
      rejected: ["receipt", "delivery_delayed"],
    });
    expect(LEGAL_PAIRS).toHaveLength(7);
    expect(ILLEGAL_PAIRS).toHaveLength(FROM.length * STATUSES.length - 7);
    expect([...TERMINAL_STATUSES].sort()).toEqual(["failed", "rejected", "success"]);
    expect(STATUSES.filter(isTerminal)).toEqual(["success", "failed", "rejected"]);
    expect(isTerminal("initial")).toBe(false);
  });

  it("every history used below really ends in the status it is named after", () => {
    for (const from of FROM) expect(fold(HISTORY_ENDING_IN[from]).status).toBe(from);
  });

  describe("evolve folds every legal transition", () => {
    for (const { from, to } of LEGAL_PAIRS) {
      it(`${from} -> ${to}`, () => {
        const before = fold(HISTORY_ENDING_IN[from]);
        const after = evolve(before, EVENT_OF_TYPE[to]);
        expect(after.status).toBe(to);
        expect(after.version).toBe(before.version + 1);
      });
    }
  });

  describe("evolve refuses every transition not in the table", () => {
    for (const { from, to } of ILLEGAL_PAIRS) {
      it(`${from} -> ${to} throws IllegalTransitionError`, () => {
        const before = fold(HISTORY_ENDING_IN[from]);
        let thrown: unknown;
        try {
          evolve(before, EVENT_OF_TYPE[to]);
        } catch (error) {
          thrown = error;
        }
        expect(thrown).toBeInstanceOf(IllegalTransitionError);
        expect(thrown).toMatchObject({ from, to, message: `illegal transition ${from} -> ${to}` });
      });
    }
  });

  it("evolve does not change the state it was given when it refuses", () => {
    const before = fold(HISTORY_ENDING_IN.success);
    const snapshot = structuredClone(before);
    expect(() => evolve(before, EVENT_OF_TYPE.pending)).toThrow(IllegalTransitionError);
    expect(before).toEqual(snapshot);
  });

  it("fold of a history with an illegal event in the middle throws instead of skipping it", () => {
    const history = [ev.accepted(), ev.succeeded(1, 0, 10)]; // accepted -> success skips pending
    expect(() => fold(history)).toThrow(IllegalTransitionError);
  });
});

// =============================================================================================
// Legal transitions, command by command
// =============================================================================================

describe("(none) -> accepted", () => {
  it("a validated request becomes an accepted event carrying the whole message", () => {
    const message = content({ priority: "critical", notificationType: "OTP" });
    const result = given([]).when(cmd.accept(message, 0));
    expect(result.events()).toEqual([ev.accepted(message, 0)]);
    expect(result.state()).toEqual({
      status: "accepted",
      message,
      version: 1,
      acceptedAt: iso(0),
      updatedAt: iso(0),
      retryCount: 0,
      attempts: 0,
      delivery: { state: "unknown", updatedAt: null, errorCode: null },
      delayNoted: false,
    });
  });

  it("the initial state is the empty fold", () => {
    expect(fold([])).toEqual(initialState);
    expect(initialState).toEqual({ status: "initial", version: 0 });
  });
});

describe("accepted -> pending", () => {
  it("a worker starting delivery records attempt 1 in flight with retry_count 0", () => {
    const result = given([ev.accepted()]).when(cmd.start(2 * SECOND));
    expect(result.events()).toEqual([ev.started(1, 0, 2 * SECOND)]);
    expect(result.state()).toMatchObject({
      status: "pending",
      attempts: 1,
      retryCount: 0,
      attemptInFlight: true,
      nextAttemptAt: null,
      version: 2,
      acceptedAt: iso(0),
      updatedAt: iso(2 * SECOND),
    });
  });

  it("an attempt starting one millisecond before the message expires still starts", () => {
    const message = content({ expiresAt: iso(10 * MINUTE) });
    const events = given([ev.accepted(message)])
      .when(cmd.start(10 * MINUTE - 1))
      .events();
    expect(events).toEqual([ev.started(1, 0, 10 * MINUTE - 1)]);
  });
});

describe("pending -> pending (transient failure, retry scheduled)", () => {
  it("a transient failure of attempt 1 schedules retry 1 at now + the policy's first delay", () => {
    const outcome = transient();
    const result = given(historyWithAttemptInFlight(1)).when(
      cmd.record(1, outcome, 3 * SECOND, { random: 0 }),
    );
    // retry 1, random 0: half of baseDelayMs
    expect(result.events()).toEqual([ev.scheduled(1, 1, 3 * SECOND, 3 * SECOND + 500, errorOf(outcome))]);
    expect(result.state()).toMatchObject({
      status: "pending",
      attempts: 1,
      retryCount: 1,
      attemptInFlight: false,
      nextAttemptAt: iso(3 * SECOND + 500),
    });
  });

  it("the injected random decides where in the jitter window the retry lands", () => {
    const history = historyWithAttemptInFlight(1);
    const early = given(history)
      .when(cmd.record(1, transient(), 3 * SECOND, { random: 0 }))
      .state();
    const late = given(history)
      .when(cmd.record(1, transient(), 3 * SECOND, { random: 0.5 }))
      .state();
    expect(early).toMatchObject({ nextAttemptAt: iso(3 * SECOND + 500) });
    expect(late).toMatchObject({ nextAttemptAt: iso(3 * SECOND + 750) });
  });

  it("each further transient failure doubles the delay and adds one to retry_count", () => {
    // attempt 3 in flight: retries 1 and 2 done; this failure schedules retry 3 (4000 ms, half with random 0)
    const result = given(historyWithAttemptInFlight(3)).when(
      cmd.record(3, transient(), 40 * SECOND, { random: 0 }),
    );
    const events = result.events();
    expect(events).toEqual([ev.scheduled(3, 3, 40 * SECOND, 40 * SECOND + 2000)]);
  });

  it("the policy given with the command is the one applied", () => {
    const slow: RetryPolicy = { maxAttempts: 5, baseDelayMs: 8000, maxDelayMs: 60_000 };
    const events = given(historyWithAttemptInFlight(1))
      .when(cmd.record(1, transient(), 3 * SECOND, { policy: slow, random: 0 }))
      .events();
    expect(events[0]).toMatchObject({ data: { kind: "retry_scheduled", retryAt: iso(3 * SECOND + 4000) } });
  });

  it("a scheduled retry starting when due becomes attempt 2 with retry_count unchanged", () => {
    const history = [...historyWithAttemptInFlight(1), ev.scheduled(1, 1, 3 * SECOND, 4 * SECOND)];
    const result = given(history).when(cmd.start(4 * SECOND));
    expect(result.events()).toEqual([ev.started(2, 1, 4 * SECOND)]);
    expect(result.state()).toMatchObject({
      status: "pending",
      attempts: 2,
      retryCount: 1,
      attemptInFlight: true,
      nextAttemptAt: null,
    });
  });

  it("a scheduled retry picked up late (queue backlog) still starts", () => {
    const history = [...historyWithAttemptInFlight(1), ev.scheduled(1, 1, 3 * SECOND, 4 * SECOND)];
    expect(
      given(history)
        .when(cmd.start(9 * MINUTE))
        .events(),
    ).toEqual([ev.started(2, 1, 9 * MINUTE)]);
  });
});

describe("pending -> success", () => {
  it("the provider accepting attempt 1 makes the message a success with retry_count 0", () => {
    const result = given(historyWithAttemptInFlight(1)).when(cmd.record(1, delivered, 2 * SECOND));
    expect(result.events()).toEqual([ev.succeeded(1, 0, 2 * SECOND)]);
    expect(result.state()).toMatchObject({
      status: "success",
      deliveredAt: iso(2 * SECOND),
      attempts: 1,
      retryCount: 0,
    });
  });

  it("a provider that says what it charges and how many segments it counted has both recorded with the success", () => {
    const priced: DeliveryOutcome = {
      ok: true,
      provider: "twilio",
      providerMessageId: "SM123",
      price: { amount: "-0.00750", currency: "USD" },
      segments: 2,
    };
    const events = given(historyWithAttemptInFlight(1))
      .when(cmd.record(1, priced, 2 * SECOND))
      .events();
    expect(events).toEqual([
      {
        type: "success",
        retryCount: 0,
        occurredAt: iso(2 * SECOND),
        data: {
          attempt: 1,
          provider: "twilio",
          providerMessageId: "SM123",
          price: { amount: "-0.00750", currency: "USD" },
          segments: 2,
        },
      },
    ]);
  });

  it("a provider that says neither adds neither field: the success keeps its shape", () => {
    const [event] = given(historyWithAttemptInFlight(1))
      .when(cmd.record(1, delivered, 2 * SECOND))
      .events();
    expect(Object.keys(event?.data ?? {})).toEqual(["attempt", "provider", "providerMessageId"]);
  });

  it("success on attempt 3 carries retry_count 2", () => {
    const events = given(historyWithAttemptInFlight(3))
      .when(cmd.record(3, delivered, 31 * SECOND))
      .events();
    expect(events).toEqual([ev.succeeded(3, 2, 31 * SECOND)]);
  });
});

describe("pending -> rejected (provider refused the recipient)", () => {
  it("a 'rejected' class error ends the message as rejected / recipient_refused, without retry", () => {
    const result = given(historyWithAttemptInFlight(2)).when(cmd.record(2, refusedByProvider, 20 * SECOND));
    expect(result.events()).toEqual([
      ev.rejected("recipient_refused", 2, 1, 20 * SECOND, errorOf(refusedByProvider)),
    ]);
    expect(result.state()).toMatchObject({ status: "rejected", reason: "recipient_refused", retryCount: 1 });
  });
});

describe("pending -> failed", () => {
  it("retries_exhausted: a transient failure of attempt maxAttempts fails with retry_count maxAttempts - 1", () => {
    const outcome = transient();
    const result = given(historyWithAttemptInFlight(5)).when(cmd.record(5, outcome, 60 * SECOND));
    expect(result.events()).toEqual([ev.failed("retries_exhausted", 5, 4, 60 * SECOND, errorOf(outcome))]);
    expect(result.state()).toMatchObject({
      status: "failed",
      reason: "retries_exhausted",
      attempts: 5,
      retryCount: 4,
    });
  });

  it("retries_exhausted follows the policy's maxAttempts, not a constant", () => {
    const twice: RetryPolicy = { maxAttempts: 2, baseDelayMs: 1000, maxDelayMs: 60_000 };
    const onSecond = given(historyWithAttemptInFlight(2)).when(
      cmd.record(2, transient(), 20 * SECOND, { policy: twice }),
    );
    expect(onSecond.events()[0]).toMatchObject({
      type: "failed",
      data: { reason: "retries_exhausted", attempt: 2 },
    });
    const onFirst = given(historyWithAttemptInFlight(1)).when(
      cmd.record(1, transient(), 2 * SECOND, { policy: twice }),
    );
    expect(onFirst.events()[0]).toMatchObject({ type: "pending", data: { kind: "retry_scheduled" } });
  });

  it("retries_disabled: with retry_enabled false a transient failure ends after exactly one attempt", () => {
    const message = content({ retryEnabled: false });
    const outcome = transient({ code: "timeout", message: "provider timed out" });
    const result = given(historyWithAttemptInFlight(1, message)).when(cmd.record(1, outcome, 2 * SECOND));
    expect(result.events()).toEqual([ev.failed("retries_disabled", 1, 0, 2 * SECOND, errorOf(outcome))]);
    expect(result.state()).toMatchObject({ status: "failed", attempts: 1, retryCount: 0 });
  });

  it("ttl_expired: a retry that would land after expiresAt is not scheduled", () => {
    const message = content({ priority: "critical", expiresAt: iso(10 * MINUTE) });
    const history = historyWithAttemptInFlight(1, message);
    // retry 1 with random 0 waits 500 ms: lands 100 ms past expiry
    const outcome = transient();
    const events = given(history)
      .when(cmd.record(1, outcome, 10 * MINUTE - 400, { random: 0 }))
      .events();
    expect(events).toEqual([ev.failed("ttl_expired", 1, 0, 10 * MINUTE - 400, errorOf(outcome))]);
  });

  it("ttl_expired: a retry landing exactly at expiresAt is not scheduled either (no attempt starts at expiry)", () => {
    const message = content({ expiresAt: iso(10 * MINUTE) });
    const history = historyWithAttemptInFlight(1, message);
    const atExpiry = given(history)
      .when(cmd.record(1, transient(), 10 * MINUTE - 500, { random: 0 }))
      .events();
    expect(atExpiry[0]).toMatchObject({ type: "failed", data: { reason: "ttl_expired" } });
    const justBefore = given(history)
      .when(cmd.record(1, transient(), 10 * MINUTE - 501, { random: 0 }))
      .events();
    expect(justBefore).toEqual([ev.scheduled(1, 1, 10 * MINUTE - 501, 10 * MINUTE - 1)]);
  });

  it("ttl_expired: a Retry-After pushing the retry past expiresAt fails the message", () => {
    const message = content({ expiresAt: iso(10 * MINUTE) });
    const outcome = transient({ code: "429", retryAfterMs: 10 * MINUTE });
    const events = given(historyWithAttemptInFlight(1, message))
      .when(cmd.record(1, outcome, 2 * SECOND))
      .events();
    expect(events).toEqual([ev.failed("ttl_expired", 1, 0, 2 * SECOND, errorOf(outcome))]);
  });

  it("ttl_expired: a first attempt picked up after expiresAt records the attempt and fails at once", () => {
    const message = content({ expiresAt: iso(10 * MINUTE) });
    const result = given([ev.accepted(message)]).when(cmd.start(11 * MINUTE));
    // accepted -> failed is not in the table, so the attempt is opened and closed in one decision
    expect(result.events()).toEqual([
      ev.started(1, 0, 11 * MINUTE),
      ev.failed("ttl_expired", 1, 0, 11 * MINUTE),
    ]);
    expect(result.state()).toMatchObject({
      status: "failed",
      reason: "ttl_expired",
      attempts: 1,
      retryCount: 0,
    });
  });

  it("ttl_expired: a first attempt starting exactly at expiresAt fails too", () => {
    const message = content({ expiresAt: iso(10 * MINUTE) });
    const events = given([ev.accepted(message)])
      .when(cmd.start(10 * MINUTE))
      .events();
    expect(events.map((e) => e.type)).toEqual(["pending", "failed"]);
    expect(events[1]).toMatchObject({ data: { reason: "ttl_expired" } });
  });

  it("ttl_expired: a scheduled retry picked up after expiresAt fails without starting another attempt", () => {
    const message = content({ expiresAt: iso(10 * MINUTE) });
    const history = [...historyWithAttemptInFlight(2, message), ev.scheduled(2, 2, 20 * SECOND, 22 * SECOND)];
    const result = given(history).when(cmd.start(10 * MINUTE));
    const events = result.events();
    expect(events).toHaveLength(1);
    expect(events[0]).toMatchObject({ type: "failed", data: { reason: "ttl_expired", attempt: 2 } });
    // retry_count never goes backwards: it keeps the count of the scheduled retry
    expect(events[0]?.retryCount).toBe(2);
    expect(result.state()).toMatchObject({ status: "failed", attempts: 2 });
  });

  it("permanent_error: a 'permanent' class error fails the message without retry", () => {
    const result = given(historyWithAttemptInFlight(1)).when(cmd.record(1, permanentFailure, 2 * SECOND));
    expect(result.events()).toEqual([
      ev.failed("permanent_error", 1, 0, 2 * SECOND, errorOf(permanentFailure)),
    ]);
    expect(result.state()).toMatchObject({ status: "failed", reason: "permanent_error" });
  });

  it("outcome_unknown: an interrupted attempt with retries disabled fails, since a second send is not allowed", () => {
    const message = content({ retryEnabled: false });
    const result = given(historyWithAttemptInFlight(1, message)).when(cmd.start(5 * MINUTE));
    const events = result.events();
    expect(events).toHaveLength(1);
    expect(events[0]).toMatchObject({
      type: "failed",
      retryCount: 0,
      occurredAt: iso(5 * MINUTE),
      data: {
        reason: "outcome_unknown",
        attempt: 1,
        error: { class: "transient", code: "attempt_interrupted" },
      },
    });
    expect(result.state()).toMatchObject({ status: "failed", reason: "outcome_unknown", attempts: 1 });
  });
});

// =============================================================================================
// Illegal commands
// =============================================================================================

describe("decide refuses what the table does not allow", () => {
  const terminal: Status[] = ["success", "failed", "rejected"];
  const commandsFor = (state: MessageState): Record<string, Command> => ({
    accept: cmd.accept(content(), HOUR),
    start_attempt: cmd.start(HOUR),
    record_outcome: cmd.record(state.status === "initial" ? 1 : state.attempts, delivered, HOUR),
  });

  for (const status of terminal) {
    const state = fold(HISTORY_ENDING_IN[status]);
    for (const [name, command] of Object.entries(commandsFor(state))) {
      it(`${name} on a ${status} message is refused as already_final`, () => {
        expect(given(HISTORY_ENDING_IN[status]).when(command).refused()).toEqual({
          refused: "already_final",
          status,
        });
      });
    }
  }

  it("accepting the same message twice is refused", () => {
    expect(given([ev.accepted()]).when(cmd.accept()).refused()).toMatchObject({ refused: "illegal" });
    expect(given(historyWithAttemptInFlight(1)).when(cmd.accept()).refused()).toMatchObject({
      refused: "illegal",
    });
  });

  it("start_attempt is refused for a message that was never accepted", () => {
    expect(given([]).when(cmd.start(0)).refused()).toMatchObject({ refused: "illegal" });
  });

  it("an outcome for a message that never started an attempt is refused", () => {
    expect(
      given([ev.accepted()])
        .when(cmd.record(1, delivered, 5))
        .refused(),
    ).toEqual({
      refused: "illegal",
      reason: "attempt 1 is not in flight",
    });
    expect(
      given([])
        .when(cmd.record(1, delivered, 5))
        .refused(),
    ).toMatchObject({ refused: "illegal" });
  });

  it("an outcome arriving after the retry was already scheduled (no attempt in flight) is refused", () => {
    const history = [...historyWithAttemptInFlight(1), ev.scheduled(1, 1, 3 * SECOND, 4 * SECOND)];
    expect(
      given(history)
        .when(cmd.record(1, delivered, 3500))
        .refused(),
    ).toMatchObject({ refused: "illegal" });
  });

  it("a stale outcome for an earlier attempt is refused while a later attempt is in flight", () => {
    const refusal = given(historyWithAttemptInFlight(2))
      .when(cmd.record(1, delivered, 16 * SECOND))
      .refused();
    expect(refusal).toEqual({ refused: "illegal", reason: "attempt 1 is not in flight" });
  });

  it("an outcome for a future attempt number is refused", () => {
    const refusal = given(historyWithAttemptInFlight(2))
      .when(cmd.record(3, delivered, 16 * SECOND))
      .refused();
    expect(refusal).toMatchObject({ refused: "illegal" });
  });

  it("start_attempt before the retry is due is refused as not_due with the due time", () => {
    const history = [...historyWithAttemptInFlight(1), ev.scheduled(1, 1, 3 * SECOND, 4 * SECOND)];
    expect(given(history).when(cmd.start(3500)).refused()).toEqual({
      refused: "not_due",
      dueAt: iso(4 * SECOND),
    });
    expect(
      given(history)
        .when(cmd.start(4 * SECOND - 1))
        .refused(),
    ).toEqual({
      refused: "not_due",
      dueAt: iso(4 * SECOND),
    });
  });

  it("decide never throws and never produces an illegal event, whatever the state and command", () => {
    for (const from of FROM) {
      const state = fold(HISTORY_ENDING_IN[from]);
      for (const command of Object.values(commandsFor(state))) {
        const decision = decide(state, command);
        if ("events" in decision) expect(() => fold(decision.events, state)).not.toThrow();
        else expect(decision.refused).toMatch(/^(already_final|not_due|illegal)$/);
      }
    }
  });
});

// =============================================================================================
// Interrupted attempts (at-least-once delivery)
// =============================================================================================

describe("an attempt interrupted before its outcome was recorded", () => {
  it("starting again records the interrupted attempt as a retry and starts the next one, so both sends are visible", () => {
    const result = given(historyWithAttemptInFlight(1)).when(cmd.start(5 * MINUTE, { random: 0.9 }));
    const events = result.events();
    expect(events).toHaveLength(2);
    expect(events[0]).toEqual({
      type: "pending",
      retryCount: 1,
      occurredAt: iso(5 * MINUTE),
      data: {
        kind: "retry_scheduled",
        attempt: 1,
        error: { class: "transient", code: "attempt_interrupted", message: expect.any(String) },
        retryAt: iso(5 * MINUTE), // at once: the interrupted attempt already waited its turn
      },
    });
    expect(events[1]).toEqual(ev.started(2, 1, 5 * MINUTE));
    expect(result.state()).toMatchObject({
      status: "pending",
      attempts: 2,
      retryCount: 1,
      attemptInFlight: true,
    });
  });

  it("an interruption of a later attempt continues the count (attempt 3 -> retry 3, attempt 4)", () => {
    const events = given(historyWithAttemptInFlight(3))
      .when(cmd.start(2 * MINUTE))
      .events();
    expect(events.map((e) => [e.type, e.retryCount, e.data])).toEqual([
      ["pending", 3, expect.objectContaining({ kind: "retry_scheduled", attempt: 3 })],
      ["pending", 3, { kind: "attempt_started", attempt: 4 }],
    ]);
  });

  it("with the attempts exhausted, the interrupted attempt fails the message instead of starting another", () => {
    const result = given(historyWithAttemptInFlight(5)).when(cmd.start(5 * MINUTE));
    const events = result.events();
    expect(events).toHaveLength(1);
    expect(events[0]).toMatchObject({
      type: "failed",
      retryCount: 4,
      data: { reason: "outcome_unknown", attempt: 5, error: { code: "attempt_interrupted" } },
    });
    expect(result.state()).toMatchObject({ status: "failed", attempts: 5 });
  });

  it("the late outcome of the interrupted attempt is refused once the next attempt started", () => {
    const history = historyWithAttemptInFlight(1);
    const restarted = [
      ...history,
      ...given(history)
        .when(cmd.start(5 * MINUTE))
        .events(),
    ];
    expect(
      given(restarted)
        .when(cmd.record(1, delivered, 5 * MINUTE + 1))
        .refused(),
    ).toMatchObject({
      refused: "illegal",
    });
    expect(
      given(restarted)
        .when(cmd.record(2, delivered, 5 * MINUTE + 1))
        .events(),
    ).toEqual([ev.succeeded(2, 1, 5 * MINUTE + 1)]);
  });
});

// =============================================================================================
// Whole lives, as the provider simulator would script them
// =============================================================================================

interface Life {
  events: MessageEvent[];
  state: MessageState;
}

/**
 * Accepts a message at 0 and drives it to a terminal state like a worker would: start each attempt
 * as soon as it is due, get the provider's answer 100 ms later.
 */
function live(
  outcomeOfAttempt: (attempt: number) => DeliveryOutcome,
  { message = content(), policy = POLICY, random = 0.5 }: { message?: MessageContent } & Knobs = {},
): Life {
  const events: MessageEvent[] = [];
  const apply = (command: Command) => {
    const decision = decide(fold(events), command);
    if (!("events" in decision)) throw new Error(`refused: ${JSON.stringify(decision)}`);
    events.push(...decision.events);
  };
  apply(cmd.accept(message, 0));
  let now = 0;
  for (let step = 0; step < 50; step++) {
    const state = fold(events);
    if (isTerminal(state.status)) return { events, state };
    if (state.status === "pending" && state.nextAttemptAt)
      now = Date.parse(state.nextAttemptAt) - NOW.getTime();
    apply(cmd.start(now, { policy, random }));
    const started = fold(events);
    if (started.status !== "pending") continue;
    now += 100;
    apply(cmd.record(started.attempts, outcomeOfAttempt(started.attempts), now, { policy, random }));
  }
  throw new Error("the message never reached a terminal state");
}

function kinds(events: readonly MessageEvent[]): string[] {
  return events.map((e) => (e.type === "pending" ? e.data.kind : e.type));
}

describe("scripted lives", () => {
  it("success on the first attempt: success, retry_count 0", () => {
    const { events, state } = live(() => delivered);
    expect(kinds(events)).toEqual(["accepted", "attempt_started", "success"]);
    expect(state).toMatchObject({ status: "success", attempts: 1, retryCount: 0, version: 3 });
  });

  it("one transient failure, then success: retry_count 1", () => {
    const { events, state } = live((attempt) => (attempt < 2 ? transient() : delivered));
    expect(kinds(events)).toEqual([
      "accepted",
      "attempt_started",
      "retry_scheduled",
      "attempt_started",
      "success",
    ]);
    expect(state).toMatchObject({ status: "success", attempts: 2, retryCount: 1 });
    expect(events.at(-1)).toMatchObject({ data: { attempt: 2 } });
  });

  it("two transient failures, then success: retry_count 2", () => {
    const { events, state } = live((attempt) => (attempt < 3 ? transient() : delivered));
    expect(kinds(events)).toEqual([
      "accepted",
      "attempt_started",
      "retry_scheduled",
      "attempt_started",
      "retry_scheduled",
      "attempt_started",
      "success",
    ]);
    expect(state).toMatchObject({ status: "success", attempts: 3, retryCount: 2 });
    if (state.status === "initial") throw new Error("unreachable");
    expect(state.retryCount).toBe(state.attempts - 1);
  });

  it("always transient with maxAttempts 5: failed after 5 attempts, retry_count 4", () => {
    const { events, state } = live(() => transient());
    expect(kinds(events).filter((k) => k === "attempt_started")).toHaveLength(5);
    expect(kinds(events).filter((k) => k === "retry_scheduled")).toHaveLength(4);
    expect(events.at(-1)).toMatchObject({
      type: "failed",
      retryCount: 4,
      data: { reason: "retries_exhausted", attempt: 5 },
    });
    expect(state).toMatchObject({
      status: "failed",
      reason: "retries_exhausted",
      attempts: 5,
      retryCount: 4,
    });
  });

  it("always transient: the gaps between attempts grow with the backoff", () => {
    const { events } = live(() => transient(), { random: 0 });
    const retryAts = events.flatMap((e) =>
      e.type === "pending" && e.data.kind === "retry_scheduled"
        ? [Date.parse(e.data.retryAt) - Date.parse(e.occurredAt)]
        : [],
    );
    expect(retryAts).toEqual([500, 1000, 2000, 4000]);
  });

  it("429 with a Retry-After longer than the backoff: the retry waits for the Retry-After", () => {
    const throttled = transient({ code: "429", message: "too many requests", retryAfterMs: 30 * SECOND });
    const { events, state } = live((attempt) => (attempt === 1 ? throttled : delivered));
    const scheduled = events[2];
    // attempt 1 answered at 100 ms; the backoff alone would have said at most 1100 ms
    expect(scheduled).toEqual(ev.scheduled(1, 1, 100, 100 + 30 * SECOND, errorOf(throttled)));
    expect(events[3]).toEqual(ev.started(2, 1, 100 + 30 * SECOND));
    expect(state).toMatchObject({ status: "success", attempts: 2, retryCount: 1 });
    // and a worker trying when the backoff alone would have allowed it is told to wait
    expect(given(events.slice(0, 3)).when(cmd.start(1100)).refused()).toEqual({
      refused: "not_due",
      dueAt: iso(100 + 30 * SECOND),
    });
  });

  it("retries disabled and a transient failure: failed after exactly one attempt", () => {
    const { events, state } = live(() => transient(), { message: content({ retryEnabled: false }) });
    expect(kinds(events)).toEqual(["accepted", "attempt_started", "failed"]);
    expect(state).toMatchObject({ status: "failed", reason: "retries_disabled", attempts: 1, retryCount: 0 });
  });

  it("a critical message that keeps failing with long Retry-After stops at its 10 minute TTL", () => {
    const message = content({ priority: "critical", notificationType: "OTP", expiresAt: iso(10 * MINUTE) });
    const slow = transient({ code: "429", retryAfterMs: 4 * MINUTE });
    const { events, state } = live(() => slow, { message });
    expect(state).toMatchObject({ status: "failed", reason: "ttl_expired", attempts: 3, retryCount: 2 });
    for (const e of events) {
      if (e.type === "pending" && e.data.kind === "attempt_started") {
        expect(Date.parse(e.occurredAt)).toBeLessThan(Date.parse(message.expiresAt));
      }
    }
  });
});

// =============================================================================================
// Property-style: random command sequences never produce an illegal history
// =============================================================================================

/** A small seeded PRNG (mulberry32), so every failing seed can be replayed. */
function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296;
  };
}

/**
 * Facts that stop an attempt before any provider call: an organization deactivated since
 * acceptance (it rejects only a message not yet attempted), or a template that is missing.
 */
const REFUSING_FACTS: readonly Facts[] = [
  { organizationActive: false, preparation: { ready: true } },
  {
    organizationActive: true,
    preparation: {
      ready: false,
      reason: "template_not_found",
      error: { class: "rejected", code: "template_not_found", message: "deleted" },
    },
  },
];

const RANK: Record<MessageState["status"], number> = {
  initial: 0,
  accepted: 1,
  pending: 2,
  success: 3,
  failed: 3,
  rejected: 3,
};

describe("random command sequences (property)", () => {
  it("never yield an illegal state over 500 seeds", () => {
    const violations: string[] = [];
    const check = (ok: boolean, what: string) => {
      if (!ok) violations.push(what);
    };
    const reached = new Set<string>();
    let eventsSeen = 0;

    for (let seed = 1; seed <= 500; seed++) {
      const rnd = prng(seed);
      const pick = <T>(items: readonly T[]): T => items[Math.floor(rnd() * items.length)] as T;
      const baseDelayMs = 1 + Math.floor(rnd() * 2000);
      const policy: RetryPolicy = {
        maxAttempts: 1 + Math.floor(rnd() * 6),
        baseDelayMs,
        maxDelayMs: baseDelayMs * (1 + Math.floor(rnd() * 40)),
      };
      const message = content({ retryEnabled: rnd() < 0.75, expiresAt: iso(Math.floor(rnd() * 2 * MINUTE)) });
      const expiresAt = Date.parse(message.expiresAt);
      const outcomes: DeliveryOutcome[] = [
        delivered,
        transient(),
        transient(),
        transient({ code: "429", retryAfterMs: Math.floor(rnd() * 20 * SECOND) }),
        refusedByProvider,
        permanentFailure,
      ];

      const events: MessageEvent[] = [];
      let state: MessageState = initialState;
      let now = 0;
      for (let step = 0; step < 40; step++) {
        now += Math.floor(rnd() * 3 * SECOND);
        if (state.status === "pending" && state.nextAttemptAt && rnd() < 0.5) {
          now = Math.max(now, Date.parse(state.nextAttemptAt) - NOW.getTime());
        }
        const knobs = { policy, random: rnd() };
        const roll = rnd();
        const attempt = state.status === "initial" ? 1 : rnd() < 0.9 ? state.attempts : Math.floor(rnd() * 7);
        const command: Command =
          step === 0 || roll < 0.05
            ? cmd.accept(message, now)
            : roll < 0.1
              ? cmd.start(now, knobs, pick(REFUSING_FACTS))
              : roll < 0.55
                ? cmd.start(now, knobs)
                : cmd.record(attempt, pick(outcomes), now, knobs);

        const decision = decide(state, command);
        const where = `seed ${seed} step ${step} ${command.type} in ${state.status}`;
        if (!("events" in decision)) {
          check(
            (decision.refused === "already_final") === isTerminal(state.status),
            `${where}: wrong refusal`,
          );
          continue;
        }
        check(!isTerminal(state.status), `${where}: events from a terminal state`);
        check(decision.events.length > 0, `${where}: empty decision`);

        for (const event of decision.events) {
          const previous = state;
          state = evolve(state, event); // throws IllegalTransitionError on an illegal transition
          events.push(event);
          if (previous.status !== "initial") {
            check(event.retryCount >= previous.retryCount, `${where}: retry_count went down`);
          }
          check(RANK[state.status] >= RANK[previous.status], `${where}: status moved backwards`);
          check(Date.parse(event.occurredAt) === at(now).getTime(), `${where}: event not stamped with now`);
          if (event.type === "pending" && event.data.kind === "retry_scheduled") {
            const retryAt = Date.parse(event.data.retryAt);
            check(retryAt < expiresAt, `${where}: retry scheduled past the TTL`);
            check(retryAt >= Date.parse(event.occurredAt), `${where}: retry scheduled in the past`);
          }
        }

        check(
          state.version === events.length,
          `${where}: version ${state.version} != ${events.length} events`,
        );
        if (state.status === "initial") continue;
        check(
          state.attempts <= (message.retryEnabled ? policy.maxAttempts : 1),
          `${where}: ${state.attempts} attempts`,
        );
        check(
          state.attempts === 0
            ? state.retryCount === 0
            : state.retryCount >= state.attempts - 1 && state.retryCount <= state.attempts,
          `${where}: retry_count ${state.retryCount} for ${state.attempts} attempts`,
        );
        // A provider's answer ends the attempt it answers; a pre-send rejection may follow a retry.
        if (
          state.status === "success" ||
          (state.status === "rejected" && state.reason === "recipient_refused")
        ) {
          check(state.retryCount === state.attempts - 1, `${where}: retry_count != attempts - 1`);
        }
        if (isTerminal(state.status))
          reached.add(state.status === "failed" ? `failed:${state.reason}` : state.status);
      }
      // the live fold and a fold of the whole history from scratch agree (projection rebuild)
      expect(fold(events), `seed ${seed}: refold differs`).toEqual(state);
      eventsSeen += events.length;
    }

    expect(violations).toEqual([]);
    expect(eventsSeen).toBeGreaterThan(2000);
    // the exploration really visited every ending, so the checks above ran on all of them
    expect([...reached].sort()).toEqual([
      "failed:outcome_unknown",
      "failed:permanent_error",
      "failed:retries_disabled",
      "failed:retries_exhausted",
      "failed:ttl_expired",
      "rejected",
      "success",
    ]);
  });
});
