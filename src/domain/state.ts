import {
  type EventType,
  type FailedReason,
  type MessageContent,
  type MessageEvent,
  NO_PROVIDER,
  type OutcomeProviders,
  type RejectedReason,
  TERMINAL_STATUSES,
  TRANSITIONS,
} from "./events.js";
import { applyReceipt, type Delivery, UNKNOWN_DELIVERY } from "./receipts.js";

/** The state of a message folded from its events (`evolve`), one event at a time. Pure. */

interface Known {
  message: MessageContent;
  /** Number of events folded so far; the next event gets sequence number `version + 1`. */
  version: number;
  acceptedAt: string;
  /** The last change of status (a receipt does not move it: `delivery.updatedAt` has its time). */
  updatedAt: string;
  retryCount: number;
  /** Delivery attempts started so far. */
  attempts: number;
  /** What the providers' receipts said (src/domain/receipts.ts); `unknown` until one comes. */
  delivery: Delivery;
  /** Whether a `delivery_delayed` event is recorded (only the first is: src/domain/receipts.ts notesDelay). */
  delayNoted: boolean;
}

export type MessageState =
  | { status: "initial"; version: 0 }
  | (Known & { status: "accepted" })
  | (Known & {
      status: "pending";
      attemptInFlight: boolean;
      nextAttemptAt: string | null;
      /**
       * The providers of a provider list the last failed attempt went through, as its
       * `retry_scheduled` names them (docs/decisions/0046): the next attempt tries them last, so a
       * retry after a provider's time-out goes to another. Absent when none are named.
       */
      failedOn?: readonly string[];
    })
  | (Known & { status: "success"; deliveredAt: string })
  | (Known & { status: "failed"; reason: FailedReason })
  | (Known & { status: "rejected"; reason: RejectedReason });

export const initialState: MessageState = { status: "initial", version: 0 };

export class IllegalTransitionError extends Error {
  constructor(
    readonly from: MessageState["status"],
    readonly to: EventType,
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
      delivery: UNKNOWN_DELIVERY,
      delayNoted: false,
    };
  }
  if (state.status === "initial") throw new IllegalTransitionError(state.status, event.type);
  // A receipt changes the delivery alone: the status, its fields and `updatedAt` stay.
  if (event.type === "receipt")
    return {
      ...state,
      version: state.version + 1,
      delivery: applyReceipt(state.delivery, event.data, event.occurredAt),
    };
  // A delay is history only: the status, the delivery and `updatedAt` stay.
  if (event.type === "delivery_delayed") return { ...state, version: state.version + 1, delayNoted: true };
  const known: Known = {
    message: state.message,
    version: state.version + 1,
    acceptedAt: state.acceptedAt,
    updatedAt: event.occurredAt,
    retryCount: event.retryCount,
    attempts:
      event.type === "pending" && event.data.kind === "attempt_started" ? event.data.attempt : state.attempts,
    delivery: state.delivery,
    delayNoted: state.delayNoted,
  };
  // `known` is spread last: V8 builds `{ ...a, b }` far slower than `{ b, ...a }` (see accept.ts).
  switch (event.type) {
    case "pending":
      return event.data.kind === "attempt_started"
        ? {
            status: "pending",
            attemptInFlight: true,
            nextAttemptAt: null,
            ...(state.status === "pending" && state.failedOn && { failedOn: state.failedOn }),
            ...known,
          }
        : {
            status: "pending",
            attemptInFlight: false,
            nextAttemptAt: event.data.retryAt,
            ...failedOn(event.data),
            ...known,
          };
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

/** The providers a `retry_scheduled` names (the breakers' `none` aside), as the state keeps them. */
function failedOn(data: OutcomeProviders): { failedOn?: readonly string[] } {
  if (data.provider === undefined && data.failovers === undefined) return {};
  const names = [...(data.failovers ?? []).map((failover) => failover.provider)];
  if (data.provider !== undefined && data.provider !== NO_PROVIDER) names.push(data.provider);
  return names.length > 0 ? { failedOn: names } : {};
}

export function fold(events: readonly MessageEvent[], from: MessageState = initialState): MessageState {
  return events.reduce(evolve, from);
}
