import { describe, expect, it } from "vitest";
import {
  type SuppressionFact,
  suppressionReasonOf,
  suppressionReasonOfReceipt,
} from "../../../src/domain/suppression.js";
import { ACTIVE_AND_READY, cmd, ev, given, historyWithAttemptInFlight, SECOND } from "./given.js";

// The suppression list is a pre-send check (DESIGN §9, docs/decisions/0039): the worker finds
// the entries for the message's recipients, the domain decides what they mean.

const STOP = { reason: "stop", createdAt: "2026-01-01T00:00:00.000Z" } as const;
const every: SuppressionFact = { entries: [STOP], everyRecipient: true };
const some: SuppressionFact = { entries: [STOP], everyRecipient: false };

describe("start_attempt: a suppressed recipient", () => {
  it("given an accepted message, when every recipient is suppressed, then it is rejected naming the entry, before any preparation", () => {
    const events = given([ev.accepted()])
      .when(cmd.start(500, {}, { organizationActive: true, suppression: every }))
      .events();
    expect(events).toHaveLength(1);
    expect(events[0]).toMatchObject({
      type: "rejected",
      data: {
        reason: "recipient_suppressed",
        attempt: 0,
        suppression: STOP,
        error: { class: "rejected", code: "recipient_suppressed" },
      },
    });
    expect(JSON.stringify(events)).toContain("since 2026-01-01T00:00:00.000Z");
  });

  it("given a retry due, when the recipient was suppressed since, then the retry does not start", () => {
    const events = given([...historyWithAttemptInFlight(1), ev.scheduled(1, 1, 3 * SECOND, 4 * SECOND)])
      .when(cmd.start(4 * SECOND, {}, { ...ACTIVE_AND_READY, suppression: every }))
      .events();
    expect(events).toMatchObject([
      { type: "rejected", data: { reason: "recipient_suppressed", attempt: 1 } },
    ]);
  });

  it("given an inactive organization, then that reason comes first", () => {
    const events = given([ev.accepted()])
      .when(cmd.start(500, {}, { organizationActive: false, suppression: every }))
      .events();
    expect(events).toMatchObject([{ type: "rejected", data: { reason: "organization_inactive" } }]);
  });

  it("given some of an e-mail's recipients suppressed, then the attempt starts and names their entries", () => {
    const events = given([ev.accepted()])
      .when(cmd.start(500, {}, { ...ACTIVE_AND_READY, suppression: some }))
      .events();
    expect(events).toEqual([
      { ...ev.started(1, 0, 500), data: { kind: "attempt_started", attempt: 1, suppressed: [STOP] } },
    ]);
  });

  it("given some suppressed, when asked without a preparation, then the preparation is needed", () => {
    expect(
      given([ev.accepted()])
        .when(cmd.start(500, {}, { organizationActive: true, suppression: some }))
        .refused(),
    ).toEqual({
      refused: "preparation_needed",
    });
  });
});

describe("suppressionReasonOf: the outcomes that put a recipient on the list", () => {
  const refused = (code: string) => ({
    ok: false as const,
    provider: "p",
    error: { class: "rejected" as const, code, message: "m" },
  });
  it("a push subscription gone, an SMS STOP (Twilio 21610, the simulator's opted_out)", () => {
    expect(suppressionReasonOf("push", refused("subscription_gone"))).toBe("subscription_gone");
    expect(suppressionReasonOf("sms", refused("21610"))).toBe("stop");
    expect(suppressionReasonOf("sms", refused("opted_out"))).toBe("stop");
  });
  it("nothing else: an invalid number, a success, a transient failure", () => {
    expect(suppressionReasonOf("sms", refused("21211"))).toBeUndefined();
    expect(suppressionReasonOf("email", refused("21610"))).toBeUndefined();
    expect(suppressionReasonOf("sms", { ok: true, provider: "p", providerMessageId: "x" })).toBeUndefined();
    expect(
      suppressionReasonOf("sms", {
        ok: false,
        provider: "p",
        error: { class: "transient", code: "21610", message: "m" },
      }),
    ).toBeUndefined();
  });
});

describe("suppressionReasonOfReceipt: the receipts that put a recipient on the list", () => {
  it("a complaint, a bounce of a bad address and Twilio's 21610 opt-out; nothing else", () => {
    expect(suppressionReasonOfReceipt({ state: "complained", errorCode: null })).toBe("complaint");
    for (const code of ["5.1.1", "5.1.2", "5.1.3", "5.1.6", "5.1.10", "5.2.1"]) {
      expect(suppressionReasonOfReceipt({ state: "bounced", errorCode: code })).toBe("hard_bounce");
    }
    // A policy or reputation refusal, a full mailbox, a message too big or unroutable: the address is fine.
    for (const code of ["5.7.1", "5.7.26", "5.2.2", "5.3.4", "5.4.4", "5.0.0"]) {
      expect(suppressionReasonOfReceipt({ state: "bounced", errorCode: code })).toBeUndefined();
    }
    expect(suppressionReasonOfReceipt({ state: "undelivered", errorCode: "21610" })).toBe("stop");
    // A server that gave up retrying is no dead address; other undelivered codes are no opt-out.
    expect(suppressionReasonOfReceipt({ state: "bounced", errorCode: "4.4.7" })).toBeUndefined();
    expect(suppressionReasonOfReceipt({ state: "bounced", errorCode: null })).toBeUndefined();
    expect(suppressionReasonOfReceipt({ state: "undelivered", errorCode: "30003" })).toBeUndefined();
    for (const state of ["sent", "delivered"] as const) {
      expect(suppressionReasonOfReceipt({ state, errorCode: "21610" })).toBeUndefined();
    }
  });
});
