import { describe, expect, it } from "vitest";
import type { Preparation } from "../../../src/domain/decide.js";
import type { DeliveryError } from "../../../src/domain/delivery-outcome.js";
import type { MessageEvent } from "../../../src/domain/events.js";
import {
  ACTIVE_AND_READY,
  cmd,
  content,
  ev,
  type Facts,
  given,
  HOUR,
  historyWithAttemptInFlight,
  iso,
  MINUTE,
  SECOND,
} from "./given.js";

// The worker gathers the facts (is the organization active? did the channel make the message
// ready?) and the domain decides what they mean before an attempt starts.

const notFound: DeliveryError = {
  class: "rejected",
  code: "template_not_found",
  message: "no template of that name in this organization",
};
const renderFailed: DeliveryError = {
  class: "rejected",
  code: "template_render_failed",
  message: "unknown variable: first_name",
};
const missingTemplate: Preparation = { ready: false, reason: "template_not_found", error: notFound };
const brokenTemplate: Preparation = { ready: false, reason: "template_render_failed", error: renderFailed };

/** The first ask: the worker knows whether the organization is active, and has prepared nothing. */
const ACTIVE: Facts = { organizationActive: true };
const INACTIVE: Facts = { organizationActive: false };
const prepared = (preparation: Preparation, organizationActive = true): Facts => ({
  organizationActive,
  preparation,
});

const expiring = content({ expiresAt: iso(10 * MINUTE) });
/** Attempt 1 failed at 3 s; retry 1 is due at 4 s. */
const retryDueAt4s: MessageEvent[] = [
  ...historyWithAttemptInFlight(1),
  ev.scheduled(1, 1, 3 * SECOND, 4 * SECOND),
];

describe("start_attempt: the organization was deactivated after acceptance", () => {
  it("given an accepted message, when its organization is inactive, then it is rejected without an attempt and without preparing it", () => {
    const result = given([ev.accepted()]).when(cmd.start(500, {}, INACTIVE));
    expect(result.events()).toEqual([ev.rejected("organization_inactive", 0, 0, 500)]);
    expect(result.state()).toMatchObject({
      status: "rejected",
      reason: "organization_inactive",
      attempts: 0,
      retryCount: 0,
    });
  });

  it("given a retry of a message already being delivered, when its organization is inactive, then the retry still starts (checked before the first attempt only)", () => {
    const events = given(retryDueAt4s)
      .when(cmd.start(4 * SECOND, {}, prepared({ ready: true }, false)))
      .events();
    expect(events).toEqual([ev.started(2, 1, 4 * SECOND)]);
  });
});

describe("start_attempt: the preparation is asked for only when an attempt would really start", () => {
  it("given an accepted message of an active organization, when asked without a preparation, then it is needed", () => {
    expect(
      given([ev.accepted()])
        .when(cmd.start(500, {}, ACTIVE))
        .refused(),
    ).toEqual({
      refused: "preparation_needed",
    });
  });

  it("given a retry that is due, when asked without a preparation, then it is needed", () => {
    expect(
      given(retryDueAt4s)
        .when(cmd.start(4 * SECOND, {}, ACTIVE))
        .refused(),
    ).toEqual({ refused: "preparation_needed" });
  });

  it("given an interrupted attempt with attempts left, when asked without a preparation, then it is needed before anything is recorded", () => {
    expect(
      given(historyWithAttemptInFlight(1))
        .when(cmd.start(5 * MINUTE, {}, ACTIVE))
        .refused(),
    ).toEqual({ refused: "preparation_needed" });
  });

  it("given a first attempt picked up after expiry, then it fails ttl_expired without a preparation", () => {
    const events = given([ev.accepted(expiring)])
      .when(cmd.start(11 * MINUTE, {}, ACTIVE))
      .events();
    expect(events).toEqual([ev.started(1, 0, 11 * MINUTE), ev.failed("ttl_expired", 1, 0, 11 * MINUTE)]);
  });

  it("given a retry picked up after expiry, then it fails ttl_expired without a preparation", () => {
    const history = [...historyWithAttemptInFlight(1, expiring), ev.scheduled(1, 1, 3 * SECOND, 4 * SECOND)];
    const events = given(history)
      .when(cmd.start(10 * MINUTE, {}, ACTIVE))
      .events();
    expect(events).toEqual([ev.failed("ttl_expired", 1, 1, 10 * MINUTE)]);
  });

  it("given a retry not yet due, then the answer is when it is due, without a preparation", () => {
    expect(
      given(retryDueAt4s)
        .when(cmd.start(3500, {}, ACTIVE))
        .refused(),
    ).toEqual({
      refused: "not_due",
      dueAt: iso(4 * SECOND),
    });
  });

  it("given an interrupted attempt with no attempts left, then it fails outcome_unknown without a preparation", () => {
    const events = given(historyWithAttemptInFlight(5))
      .when(cmd.start(5 * MINUTE, {}, ACTIVE))
      .events();
    expect(events).toHaveLength(1);
    expect(events[0]).toMatchObject({ type: "failed", data: { reason: "outcome_unknown", attempt: 5 } });
  });

  it("given a finished message, then it is already final, without a preparation", () => {
    const finished = [ev.accepted(), ev.started(1, 0, 10), ev.succeeded(1, 0, 20)];
    expect(
      given(finished)
        .when(cmd.start(HOUR, {}, ACTIVE))
        .refused(),
    ).toEqual({
      refused: "already_final",
      status: "success",
    });
  });

  it("asked again with the message ready, the same facts give the events that start the attempt", () => {
    const history = historyWithAttemptInFlight(1);
    const asked = given(history).when(cmd.start(5 * MINUTE, { random: 0.9 }, ACTIVE));
    expect(asked.refused()).toEqual({ refused: "preparation_needed" });
    const again = given(history).when(cmd.start(5 * MINUTE, { random: 0.9 }, prepared({ ready: true })));
    expect(again.events().map((e) => (e.type === "pending" ? e.data.kind : e.type))).toEqual([
      "retry_scheduled",
      "attempt_started",
    ]);
    expect(again.events()[1]).toEqual(ev.started(2, 1, 5 * MINUTE));
  });
});

describe("start_attempt: the channel refused to prepare the message", () => {
  it("given an accepted e-mail whose template is missing, then it is rejected before any attempt is counted", () => {
    const result = given([ev.accepted()]).when(cmd.start(500, {}, prepared(missingTemplate)));
    expect(result.events()).toEqual([ev.rejected("template_not_found", 0, 0, 500, notFound)]);
    expect(result.state()).toMatchObject({ status: "rejected", reason: "template_not_found", attempts: 0 });
  });

  it("given a due retry whose template no longer renders, then it is rejected keeping its attempts and retries", () => {
    const result = given(retryDueAt4s).when(cmd.start(4 * SECOND, {}, prepared(brokenTemplate)));
    expect(result.events()).toEqual([ev.rejected("template_render_failed", 1, 1, 4 * SECOND, renderFailed)]);
    expect(result.state()).toMatchObject({ status: "rejected", attempts: 1, retryCount: 1 });
  });

  it("given an interrupted attempt, then it is rejected from the state as it was: the interruption is not recorded", () => {
    const result = given(historyWithAttemptInFlight(2)).when(cmd.start(HOUR, {}, prepared(brokenTemplate)));
    expect(result.events()).toEqual([ev.rejected("template_render_failed", 2, 1, HOUR, renderFailed)]);
  });
});

describe("start_attempt: the order of the checks", () => {
  it("a finished message is final before anything else is looked at", () => {
    const rejected = [ev.accepted(), ev.rejected("organization_inactive", 0, 0, 10)];
    expect(
      given(rejected)
        .when(cmd.start(HOUR, {}, prepared(missingTemplate, false)))
        .refused(),
    ).toMatchObject({ refused: "already_final" });
  });

  it("an inactive organization rejects before the time to live is looked at", () => {
    const events = given([ev.accepted(expiring)])
      .when(cmd.start(11 * MINUTE, {}, INACTIVE))
      .events();
    expect(events).toEqual([ev.rejected("organization_inactive", 0, 0, 11 * MINUTE)]);
  });

  it("an inactive organization rejects before the preparation is looked at", () => {
    const events = given([ev.accepted()])
      .when(cmd.start(500, {}, prepared(missingTemplate, false)))
      .events();
    expect(events).toEqual([ev.rejected("organization_inactive", 0, 0, 500)]);
  });

  it("an expired message fails ttl_expired even when its preparation was refused", () => {
    const events = given([ev.accepted(expiring)])
      .when(cmd.start(11 * MINUTE, {}, prepared(missingTemplate)))
      .events();
    expect(events).toEqual([ev.started(1, 0, 11 * MINUTE), ev.failed("ttl_expired", 1, 0, 11 * MINUTE)]);
  });

  it("a retry not yet due waits even when its preparation was refused", () => {
    expect(
      given(retryDueAt4s)
        .when(cmd.start(3500, {}, prepared(missingTemplate)))
        .refused(),
    ).toMatchObject({ refused: "not_due" });
  });

  it("a message that was never accepted is refused whatever the facts", () => {
    expect(
      given([])
        .when(cmd.start(0, {}, INACTIVE))
        .refused(),
    ).toMatchObject({ refused: "illegal" });
    expect(
      given([])
        .when(cmd.start(0, {}, ACTIVE_AND_READY))
        .refused(),
    ).toMatchObject({
      refused: "illegal",
    });
  });
});
