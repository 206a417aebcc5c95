import { describe, expect, it } from "vitest";
import type {
  DeliveryError,
  DeliveryOutcome,
  ProviderFailover,
} from "../../../src/domain/delivery-outcome.js";
import type { MessageEvent } from "../../../src/domain/events.js";
import { fold } from "../../../src/domain/state.js";
import { toHistoryEntry } from "../../../src/messages/history.js";
import {
  cmd,
  content,
  delivered,
  ev,
  given,
  historyWithAttemptInFlight,
  iso,
  MINUTE,
  permanentFailure,
  refusedByProvider,
  SECOND,
  transient,
} from "./given.js";

/**
 * The outcome of a provider list (docs/decisions/0046): its events name the provider that ended
 * each attempt and the providers the attempt left first; the state keeps those of the last failed
 * attempt for the next one. A single provider's outcome (no `failovers`) keeps the events as
 * they were.
 */

const unavailable: DeliveryError = {
  class: "transient",
  code: "http_503",
  message: "Twilio answered HTTP 503",
};
const leftPrimary: ProviderFailover[] = [{ provider: "twilio:primary", error: unavailable }];

function listed(
  outcome: DeliveryOutcome,
  provider: string,
  failovers: ProviderFailover[] = [],
): DeliveryOutcome {
  return { ...outcome, provider, failovers };
}

describe("given an attempt in flight, when a provider list's outcome is recorded", () => {
  it("a success through the second provider names it and the provider it left", () => {
    const result = given(historyWithAttemptInFlight(1)).when(
      cmd.record(1, listed(delivered, "twilio:backup", leftPrimary), 2 * SECOND),
    );
    expect(result.events()).toEqual([
      {
        type: "success",
        retryCount: 0,
        occurredAt: iso(2 * SECOND),
        data: { attempt: 1, provider: "twilio:backup", providerMessageId: "SM123", failovers: leftPrimary },
      },
    ]);
  });

  it("a success through the first provider records no failovers", () => {
    const [event] = given(historyWithAttemptInFlight(1))
      .when(cmd.record(1, listed(delivered, "twilio:primary"), 2 * SECOND))
      .events();
    expect(event?.data).toEqual({ attempt: 1, provider: "twilio:primary", providerMessageId: "SM123" });
  });

  it("a transient failure's retry names the provider that ended the attempt and those it left", () => {
    const outcome = listed(transient({ code: "timeout" }), "twilio:backup", leftPrimary);
    const [event] = given(historyWithAttemptInFlight(1))
      .when(cmd.record(1, outcome, 2 * SECOND, { random: 0 }))
      .events();
    expect(event?.data).toEqual({
      kind: "retry_scheduled",
      attempt: 1,
      error: { class: "transient", code: "timeout", message: "provider unavailable" },
      retryAt: iso(2 * SECOND + 500),
      provider: "twilio:backup",
      failovers: leftPrimary,
    });
  });

  it("a rejection (an invalid number) and a permanent failure name their provider", () => {
    const rejected = given(historyWithAttemptInFlight(1))
      .when(cmd.record(1, listed(refusedByProvider, "twilio:primary"), 2 * SECOND))
      .events();
    expect(rejected[0]?.data).toMatchObject({ reason: "recipient_refused", provider: "twilio:primary" });
    expect(rejected[0]?.data).not.toHaveProperty("failovers");
    const failed = given(historyWithAttemptInFlight(1))
      .when(cmd.record(1, listed(permanentFailure, "smtp:relay2", leftPrimary), 2 * SECOND))
      .events();
    expect(failed[0]?.data).toMatchObject({
      reason: "permanent_error",
      provider: "smtp:relay2",
      failovers: leftPrimary,
    });
  });

  it("retries exhausted on the last attempt name the provider too", () => {
    const [event] = given(historyWithAttemptInFlight(5))
      .when(cmd.record(5, listed(transient(), "twilio:backup", leftPrimary), MINUTE))
      .events();
    expect(event).toMatchObject({
      type: "failed",
      data: { reason: "retries_exhausted", provider: "twilio:backup", failovers: leftPrimary },
    });
  });

  it("a single provider's outcome (no failovers) keeps the events' shape: no provider on a failure", () => {
    const [retry] = given(historyWithAttemptInFlight(1))
      .when(cmd.record(1, transient(), 2 * SECOND))
      .events();
    expect(Object.keys(retry?.data ?? {})).toEqual(["kind", "attempt", "error", "retryAt"]);
    const [success] = given(historyWithAttemptInFlight(1))
      .when(cmd.record(1, delivered, 2 * SECOND))
      .events();
    expect(Object.keys(success?.data ?? {})).toEqual(["attempt", "provider", "providerMessageId"]);
  });
});

describe("the state keeps the providers the last failed attempt went through", () => {
  const retried = (data: Record<string, unknown>): MessageEvent[] => [
    ...historyWithAttemptInFlight(1),
    {
      type: "pending",
      retryCount: 1,
      occurredAt: iso(10 * SECOND),
      data: { kind: "retry_scheduled", attempt: 1, error: unavailable, retryAt: iso(15 * SECOND), ...data },
    },
  ];

  it("after a retry scheduled, and through the next attempt's start", () => {
    const history = retried({ provider: "twilio:backup", failovers: leftPrimary });
    expect(fold(history)).toMatchObject({ failedOn: ["twilio:primary", "twilio:backup"] });
    const started = fold([...history, ev.started(2, 1, 15 * SECOND)]);
    expect(started).toMatchObject({ attemptInFlight: true, failedOn: ["twilio:primary", "twilio:backup"] });
  });

  it("none when every breaker was open (`none`), or when the events name no provider (a single provider, or from before)", () => {
    expect(fold(retried({ provider: "none" }))).not.toHaveProperty("failedOn");
    expect(fold(retried({}))).not.toHaveProperty("failedOn");
    expect(fold(historyWithAttemptInFlight(3))).not.toHaveProperty("failedOn");
  });

  it("a later retry replaces them", () => {
    const history = [
      ...retried({ provider: "twilio:primary" }),
      ev.started(2, 1, 15 * SECOND),
      ev.scheduled(2, 2, 20 * SECOND, 25 * SECOND),
    ];
    expect(fold(history)).not.toHaveProperty("failedOn");
  });
});

describe("the history shows a provider list's fields", () => {
  it("on a retry, a success and a final failure; and nothing new for a single provider's events", () => {
    const retry = toHistoryEntry(3, {
      type: "pending",
      retryCount: 1,
      occurredAt: iso(SECOND),
      data: {
        kind: "retry_scheduled",
        attempt: 1,
        error: { ...unavailable, retryAfterMs: 1000 },
        retryAt: iso(2 * SECOND),
        provider: "twilio:backup",
        failovers: [{ provider: "twilio:primary", error: { ...unavailable, retryAfterMs: 5000 } }],
      },
    });
    expect(retry).toMatchObject({
      provider: "twilio:backup",
      failovers: [
        {
          provider: "twilio:primary",
          error: { class: "transient", code: "http_503", message: "Twilio answered HTTP 503" },
        },
      ],
    });
    expect(JSON.stringify(retry)).not.toContain("retryAfterMs");
    const success = toHistoryEntry(5, {
      type: "success",
      retryCount: 0,
      occurredAt: iso(SECOND),
      data: { attempt: 1, provider: "twilio:backup", providerMessageId: "SM1", failovers: leftPrimary },
    });
    expect(success).toMatchObject({ provider: "twilio:backup", failovers: [{ provider: "twilio:primary" }] });
    const single = toHistoryEntry(3, ev.scheduled(1, 1, SECOND, 2 * SECOND));
    expect(single).not.toHaveProperty("provider");
    expect(single).not.toHaveProperty("failovers");
    expect(toHistoryEntry(1, ev.accepted(content()))).not.toHaveProperty("failovers");
  });
});
