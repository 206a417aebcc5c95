import { describe, expect, it } from "vitest";
import { decide } from "../../../src/domain/decide.js";
import { type MessageEvent, STATUSES, type Status } from "../../../src/domain/events.js";
import {
  DELIVERY_RANK,
  DELIVERY_STATES,
  type DeliveryState,
  RECEIPT_STATES,
  type Receipt,
  type ReceiptState,
} from "../../../src/domain/receipts.js";
import { evolve, fold, type MessageState } from "../../../src/domain/state.js";
import { messageWebhookBody, webhookEventTypeOf } from "../../../src/domain/webhooks.js";
import { at, cmd, delivered, ev, iso, SECOND } from "./given.js";

/** A receipt saying `state`, with an error code for the failures. */
function receipt(
  state: ReceiptState,
  errorCode: string | null = state === "undelivered" ? "30003" : null,
): Receipt {
  return { state, errorCode, provider: "twilio", providerStatus: state, providerMessageId: "SM123" };
}

/** One history ending in each status (the receipts below come after it). */
const HISTORY_ENDING_IN: Record<Status, MessageEvent[]> = {
  accepted: [ev.accepted()],
  pending: [ev.accepted(), ev.started(1, 0, SECOND)],
  success: [ev.accepted(), ev.started(1, 0, SECOND), ev.succeeded(1, 0, 2 * SECOND)],
  failed: [ev.accepted(), ev.started(1, 0, SECOND), ev.failed("permanent_error", 1, 0, 2 * SECOND)],
  rejected: [ev.accepted(), ev.started(1, 0, SECOND), ev.rejected("recipient_refused", 1, 0, 2 * SECOND)],
};

/** Records a receipt at `t` (decide, then fold what it decided); the events it appended. */
function record(state: MessageState, r: Receipt, t: number): { state: MessageState; events: MessageEvent[] } {
  const decision = decide(state, { type: "record_receipt", receipt: r, now: at(t) });
  if (!("events" in decision)) throw new Error(`refused: ${JSON.stringify(decision)}`);
  return { state: decision.events.reduce(evolve, state), events: decision.events };
}

/** The state after a history and then receipts saying `states`, one second apart. */
function withReceipts(status: Status, states: readonly ReceiptState[]): MessageState {
  let state = fold(HISTORY_ENDING_IN[status]);
  states.forEach((s, index) => {
    state = record(state, receipt(s), 10 * SECOND + index * SECOND).state;
  });
  return state;
}

function known(state: MessageState) {
  if (state.status === "initial") throw new Error("initial");
  return state;
}

function permutations<T>(items: readonly T[]): T[][] {
  if (items.length <= 1) return [[...items]];
  return items.flatMap((item, index) =>
    permutations([...items.slice(0, index), ...items.slice(index + 1)]).map((rest) => [item, ...rest]),
  );
}

describe("the order of delivery states", () => {
  it("is unknown < sent < undelivered < delivered < bounced < complained", () => {
    expect([...DELIVERY_STATES].sort((a, b) => DELIVERY_RANK[a] - DELIVERY_RANK[b])).toEqual([
      "unknown",
      "sent",
      "undelivered",
      "delivered",
      "bounced",
      "complained",
    ]);
    expect(new Set(Object.values(DELIVERY_RANK)).size).toBe(DELIVERY_STATES.length);
    expect(RECEIPT_STATES).not.toContain("unknown");
  });

  it("a message is `unknown` from its acceptance until a receipt comes", () => {
    for (const status of STATUSES) {
      expect(known(fold(HISTORY_ENDING_IN[status])).delivery).toEqual({
        state: "unknown",
        updatedAt: null,
        errorCode: null,
      });
    }
  });
});

describe("record_receipt, in every status, from every delivery state, for every receipt", () => {
  // Every delivery state a message can be in: unknown, or the state one receipt set.
  const CURRENT: readonly DeliveryState[] = DELIVERY_STATES;
  for (const status of STATUSES) {
    for (const current of CURRENT) {
      for (const next of RECEIPT_STATES) {
        const advances = DELIVERY_RANK[next] > DELIVERY_RANK[current];
        it(`${status}, delivery ${current}, receipt ${next}: ${advances ? "recorded" : "nothing appended"}`, () => {
          const before = known(withReceipts(status, current === "unknown" ? [] : [current]));
          expect(before.delivery.state).toBe(current);
          const { state: after, events } = record(before, receipt(next), 60 * SECOND);
          const a = known(after);
          // The status and everything about the attempts stay, whatever the receipt says.
          expect(a.status).toBe(status);
          expect(a.updatedAt).toBe(before.updatedAt);
          expect(a.retryCount).toBe(before.retryCount);
          expect(a.attempts).toBe(before.attempts);
          if (!advances) {
            expect(events).toEqual([]);
            expect(a).toBe(before);
            return;
          }
          expect(events).toEqual([
            {
              type: "receipt",
              retryCount: before.retryCount,
              occurredAt: iso(60 * SECOND),
              data: { ...receipt(next), status },
            },
          ]);
          expect(a.version).toBe(before.version + 1);
          expect(a.delivery).toEqual({
            state: next,
            updatedAt: iso(60 * SECOND),
            errorCode: next === "undelivered" ? "30003" : null,
          });
          const { delivery: _d, version: _v, ...restAfter } = a;
          const { delivery: _bd, version: _bv, ...restBefore } = before;
          expect(restAfter).toEqual(restBefore);
        });
      }
    }
  }

  it("is refused for a message never accepted", () => {
    expect(decide(fold([]), { type: "record_receipt", receipt: receipt("delivered"), now: at(0) })).toEqual({
      refused: "illegal",
      reason: "no receipt for a message never accepted",
    });
  });
});

describe("receipts in any order and any number", () => {
  it("a duplicate changes nothing, its error code and time included", () => {
    let state = withReceipts("success", ["undelivered"]);
    const first = known(state).delivery;
    const again = record(state, receipt("undelivered", "30005"), 99 * SECOND);
    expect(again.events).toEqual([]);
    state = again.state;
    expect(known(state).delivery).toEqual(first);
  });

  it("a late `sent` never replaces `delivered`", () => {
    const state = withReceipts("success", ["delivered", "sent"]);
    expect(known(state).delivery.state).toBe("delivered");
    expect(known(state).version).toBe(HISTORY_ENDING_IN.success.length + 1);
  });

  it("`delivered` after `undelivered` is the carrier's last word; `undelivered` after `delivered` is not", () => {
    expect(known(withReceipts("success", ["undelivered", "delivered"])).delivery).toEqual({
      state: "delivered",
      updatedAt: iso(11 * SECOND),
      errorCode: null,
    });
    expect(known(withReceipts("success", ["delivered", "undelivered"])).delivery.state).toBe("delivered");
  });

  it("every order of the same receipts ends in the same delivery (the highest ranked)", () => {
    const states: ReceiptState[] = ["sent", "undelivered", "delivered", "bounced", "complained"];
    for (const order of permutations(states)) {
      const delivery = known(withReceipts("success", order)).delivery;
      expect(delivery.state, order.join(",")).toBe("complained");
    }
    for (const order of permutations<ReceiptState>(["sent", "undelivered", "delivered"])) {
      const state = known(withReceipts("success", [...order, ...order]));
      expect(state.delivery.state, order.join(",")).toBe("delivered");
      expect(state.delivery.errorCode).toBeNull();
      // Only the receipts that moved it forward were appended.
      const appended = state.version - HISTORY_ENDING_IN.success.length;
      expect(appended).toBeLessThanOrEqual(3);
      expect(appended).toBe(
        1 +
          order
            .slice(0, order.indexOf("delivered"))
            .filter((s, i, before) => before.slice(0, i).every((b) => DELIVERY_RANK[b] < DELIVERY_RANK[s]))
            .length,
      );
    }
  });

  it("a receipt before our own `success` is kept, and the attempt's outcome is still recorded after it", () => {
    let state = fold(HISTORY_ENDING_IN.pending);
    state = record(state, receipt("sent"), 2 * SECOND).state;
    state = record(state, receipt("delivered"), 3 * SECOND).state;
    const decision = decide(state, cmd.record(1, delivered, 4 * SECOND));
    expect("events" in decision && decision.events.map((e) => e.type)).toEqual(["success"]);
    if (!("events" in decision)) return;
    const after = known(decision.events.reduce(evolve, state));
    expect(after.status).toBe("success");
    expect(after.delivery).toEqual({ state: "delivered", updatedAt: iso(3 * SECOND), errorCode: null });
    expect(after.version).toBe(HISTORY_ENDING_IN.pending.length + 3);
  });

  it("a receipt does not stop a retry: the next attempt starts as it would have", () => {
    const history = [ev.accepted(), ev.started(1, 0, SECOND), ev.scheduled(1, 1, 2 * SECOND, 7 * SECOND)];
    const state = record(fold(history), receipt("sent"), 3 * SECOND).state;
    const decision = decide(state, cmd.start(8 * SECOND));
    expect(decision).toEqual(decide(fold(history), cmd.start(8 * SECOND)));
  });

  it("the fold of stored receipts is forward-only too (a lower one in the events changes nothing)", () => {
    const events: MessageEvent[] = [
      ...HISTORY_ENDING_IN.success,
      {
        type: "receipt",
        retryCount: 0,
        occurredAt: iso(5 * SECOND),
        data: { ...receipt("delivered"), status: "success" },
      },
      {
        type: "receipt",
        retryCount: 0,
        occurredAt: iso(6 * SECOND),
        data: { ...receipt("sent"), status: "success" },
      },
    ];
    const state = known(fold(events));
    expect(state.delivery).toEqual({ state: "delivered", updatedAt: iso(5 * SECOND), errorCode: null });
    expect(state.version).toBe(events.length);
  });
});

describe("receipts as webhook events", () => {
  const facts = {
    messageId: "0b8f2a9e-6a55-4c1e-9b1e-3f0c2d7a1b11",
    organizationId: "org-1",
    channel: "sms" as const,
    priority: "medium" as const,
    notificationType: null,
  };

  it("each outcome is its own event type; `sent` is not sent", () => {
    for (const state of RECEIPT_STATES) {
      const { events } = record(withReceipts("success", []), receipt(state), 5 * SECOND);
      const [event] = events;
      if (!event) throw new Error("no event");
      expect(webhookEventTypeOf(event)).toBe(state === "sent" ? undefined : `message.${state}`);
      const body = messageWebhookBody(facts, { ...event, seq: 4 });
      if (state === "sent") {
        expect(body).toBeUndefined();
        continue;
      }
      expect(body).toEqual({
        type: `message.${state}`,
        timestamp: iso(5 * SECOND),
        data: {
          ...(facts && {
            message_id: facts.messageId,
            organization_id: facts.organizationId,
            channel: "sms",
            priority: "medium",
            notification_type: null,
          }),
          status: "success",
          retry_count: 0,
          seq: 4,
          provider: "twilio",
          provider_message_id: "SM123",
          reason: null,
          error: null,
          next_attempt_at: null,
          delivery: {
            state,
            error_code: state === "undelivered" ? "30003" : null,
            updated_at: iso(5 * SECOND),
          },
        },
      });
    }
  });

  it("a receipt's body carries the status the message had when it came", () => {
    const { events } = record(fold(HISTORY_ENDING_IN.pending), receipt("delivered"), 5 * SECOND);
    const [event] = events;
    if (!event) throw new Error("no event");
    expect(messageWebhookBody(facts, { ...event, seq: 3 })?.data.status).toBe("pending");
  });

  it("the other events' bodies have no delivery", () => {
    const body = messageWebhookBody(facts, { ...ev.succeeded(1, 0, SECOND), seq: 3 });
    expect(body?.data.delivery).toBeNull();
  });
});

describe("a delayed delivery (history only)", () => {
  const delay = { errorCode: "4.4.1", provider: "smtp", providerStatus: "delayed" };
  function delayAt(state: MessageState, t: number) {
    const decision = decide(state, { type: "record_delay", delay, now: at(t) });
    if (!("events" in decision)) throw new Error(`refused: ${JSON.stringify(decision)}`);
    return { state: decision.events.reduce(evolve, state), events: decision.events };
  }

  for (const status of STATUSES) {
    it(`given a message ${status}, when the first delay comes, then it is recorded and nothing but the version moves`, () => {
      const before = known(fold(HISTORY_ENDING_IN[status]));
      const { state, events } = delayAt(before, 5 * SECOND);
      expect(events).toEqual([
        {
          type: "delivery_delayed",
          retryCount: before.retryCount,
          occurredAt: iso(5 * SECOND),
          data: { ...delay, status },
        },
      ]);
      const { version, delayNoted, ...rest } = known(state);
      const { version: versionBefore, delayNoted: noted, ...restBefore } = before;
      expect([version, delayNoted, noted]).toEqual([versionBefore + 1, true, false]);
      expect(rest).toEqual(restBefore);
    });
  }

  it("given a delay recorded, when another comes, then nothing is appended", () => {
    const { state } = delayAt(fold(HISTORY_ENDING_IN.success), 5 * SECOND);
    expect(delayAt(state, 6 * SECOND).events).toEqual([]);
  });

  it("given a final receipt, when a delay comes, then nothing is appended (stale); after `sent` it is", () => {
    for (const final of ["delivered", "undelivered", "bounced", "complained"] as const)
      expect(delayAt(withReceipts("success", [final]), 20 * SECOND).events, final).toEqual([]);
    expect(delayAt(withReceipts("success", ["sent"]), 20 * SECOND).events).toHaveLength(1);
  });

  it("given a delay, a later receipt still moves the delivery, and the delay is no webhook", () => {
    const { state, events } = delayAt(fold(HISTORY_ENDING_IN.success), 5 * SECOND);
    const [event] = events;
    if (!event) throw new Error("no event");
    expect(webhookEventTypeOf(event)).toBeUndefined();
    expect(known(record(state, receipt("bounced", "5.1.1"), 6 * SECOND).state).delivery).toEqual({
      state: "bounced",
      updatedAt: iso(6 * SECOND),
      errorCode: "5.1.1",
    });
  });

  it("is refused for a message never accepted", () => {
    expect(decide(fold([]), { type: "record_delay", delay, now: at(0) })).toEqual({
      refused: "illegal",
      reason: "no delay for a message never accepted",
    });
  });
});
