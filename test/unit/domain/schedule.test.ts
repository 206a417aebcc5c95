import { describe, expect, it } from "vitest";
import type { Command } from "../../../src/domain/decide.js";
import {
  MAX_SCHEDULE_AHEAD_MS,
  refuseSendAt,
  SEND_AT_TOLERANCE_MS,
  scheduleHorizonMs,
} from "../../../src/domain/schedule.js";
import {
  ACTIVE_AND_READY,
  at,
  cmd,
  content,
  ev,
  given,
  HOUR,
  historyWithAttemptInFlight,
  iso,
  SECOND,
} from "./given.js";

const DAY = 24 * HOUR;
const cancel = (t: number): Command => ({ type: "cancel", now: at(t) });

describe("send_at: what the API takes", () => {
  it("takes now, a moment ago (the request's way here), and up to 35 days ahead", () => {
    const horizon = scheduleHorizonMs(90);
    expect(refuseSendAt(at(0), at(0), horizon)).toBeUndefined();
    expect(refuseSendAt(at(-SEND_AT_TOLERANCE_MS), at(0), horizon)).toBeUndefined();
    expect(refuseSendAt(at(35 * DAY), at(0), horizon)).toBeUndefined();
  });

  it("refuses a send_at in the past, and one past the horizon, saying which", () => {
    const horizon = scheduleHorizonMs(90);
    expect(refuseSendAt(at(-SEND_AT_TOLERANCE_MS - 1), at(0), horizon)).toBe("send_at is in the past");
    expect(refuseSendAt(at(35 * DAY + 1), at(0), horizon)).toBe(
      `send_at is more than 35 days ahead (at most ${iso(35 * DAY)})`,
    );
  });

  it("schedules no further ahead than the messages are kept, less the last day's attempts", () => {
    expect(scheduleHorizonMs(90)).toBe(MAX_SCHEDULE_AHEAD_MS);
    expect(scheduleHorizonMs(37)).toBe(MAX_SCHEDULE_AHEAD_MS);
    expect(scheduleHorizonMs(14)).toBe(12 * DAY);
  });
});

describe("start_attempt: a scheduled message waits for its send_at", () => {
  const scheduled = content({ sendAt: iso(10 * SECOND), expiresAt: iso(10 * SECOND + DAY) });

  it("given a message scheduled for 10 s, when a job asks at 9.999 s, then it is not due until then, and nothing else is looked at", () => {
    const refusal = given([ev.accepted(scheduled)])
      .when(cmd.start(10 * SECOND - 1, {}, { organizationActive: false }))
      .refused();
    expect(refusal).toEqual({ refused: "not_due", dueAt: iso(10 * SECOND) });
  });

  it("given a message scheduled for 10 s, when a job asks at 10 s, then its first attempt starts", () => {
    const events = given([ev.accepted(scheduled)])
      .when(cmd.start(10 * SECOND, {}, ACTIVE_AND_READY))
      .events();
    expect(events).toEqual([ev.started(1, 0, 10 * SECOND)]);
  });

  it("given a message scheduled for 10 s, when its organization was deactivated meanwhile, then at 10 s it is rejected", () => {
    const events = given([ev.accepted(scheduled)])
      .when(cmd.start(10 * SECOND, {}, { organizationActive: false }))
      .events();
    expect(events).toEqual([ev.rejected("organization_inactive", 0, 0, 10 * SECOND)]);
  });
});

describe("cancel", () => {
  it("given an accepted message (scheduled or not), when canceled, then it is rejected with reason canceled, no attempt counted", () => {
    for (const message of [content(), content({ sendAt: iso(DAY) })]) {
      const result = given([ev.accepted(message)]).when(cancel(5 * SECOND));
      expect(result.events()).toEqual([ev.rejected("canceled", 0, 0, 5 * SECOND)]);
      expect(result.state()).toMatchObject({ status: "rejected", reason: "canceled", attempts: 0 });
    }
  });

  it("given a message whose first attempt has started, when canceled, then it is refused: too late", () => {
    expect(
      given(historyWithAttemptInFlight(1))
        .when(cancel(5 * SECOND))
        .refused(),
    ).toEqual({
      refused: "illegal",
      reason: "the first attempt has started (status pending)",
    });
  });

  it("given a canceled message, when canceled again, then nothing is appended (it is final)", () => {
    const refusal = given([ev.accepted(), ev.rejected("canceled", 0, 0, SECOND)])
      .when(cancel(2 * SECOND))
      .refused();
    expect(refusal).toEqual({ refused: "already_final", status: "rejected" });
  });

  it("given a delivered message, when canceled, then it is refused as final", () => {
    const refusal = given([...historyWithAttemptInFlight(1), ev.succeeded(1, 0, 2 * SECOND)])
      .when(cancel(3 * SECOND))
      .refused();
    expect(refusal).toEqual({ refused: "already_final", status: "success" });
  });

  it("given a canceled message, when a job asks to start an attempt, then it is final and nothing is sent", () => {
    const refusal = given([ev.accepted(), ev.rejected("canceled", 0, 0, SECOND)])
      .when(cmd.start(2 * SECOND))
      .refused();
    expect(refusal).toEqual({ refused: "already_final", status: "rejected" });
  });
});
