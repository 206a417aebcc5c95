import { isConstraintViolation } from "../db/errors.js";
import { type Command, decide } from "../src/domain/decide.js";
import type { MessageEvent } from "../src/domain/events.js";
import { isTerminal, type MessageState } from "../src/domain/state.js";
import type { Metrics } from "../src/observability/metrics.js";
import type { Logger } from "../src/runtime/logger.js";
import { ConcurrencyError } from "../src/store/events.js";
import type { DatabaseGate } from "./database-gate.js";
import type { DeliveryStore } from "./delivery-store.js";

/** Recording what the delivery processor (./deliver.ts) decided: its appends, and a provider's outcome held through database trouble. */

/** What recording needs of the processor's dependencies. */
export interface RecordDeps {
  store: DeliveryStore;
  logger: Logger;
  metrics?: Pick<Metrics, "messageFinished">;
  database?: Pick<
    DatabaseGate,
    "available" | "retryDelayMs" | "reportFailure" | "waitUntilAvailable" | "backOff"
  >;
}

/** How many times a message is read again after another writer appended first. */
export const MAX_CONFLICT_RELOADS = 3;
/** How long an outcome the provider gave is held while the database does not take it. */
const OUTCOME_HOLD_MS = 5 * 60_000;

/**
 * Records a provider's outcome. The message has been sent: a thrown error would have BullMQ run
 * the job again, find the attempt interrupted and send it a second time. So on any database
 * error the outcome is held (up to {@link OUTCOME_HOLD_MS} in all, or until shutdown) and
 * retried, once the database answers again if it is unavailable, after a back-off otherwise.
 * Thrown at once: a ConcurrencyError (another writer appended first: the processor reloads the
 * message; this is also how a first try that did commit after all shows up), except when the
 * writer appended only delivery receipts (docs/decisions/0038): the outcome is then recorded on
 * top of them and a constraint
 * violation (the same append would break the same rule). Without a gate, every error is thrown.
 */
export async function recordHeld(
  deps: RecordDeps,
  from: MessageState,
  command: Command,
): Promise<MessageState> {
  let state = from;
  let decision = decide(state, command);
  if (!("events" in decision)) {
    throw new Error(`cannot record ${command.type}: ${JSON.stringify(decision)}`);
  }
  const gate = deps.database;
  const holdUntil = performance.now() + OUTCOME_HOLD_MS;
  let receiptsMet = 0;
  for (let held = false; ; held = true) {
    try {
      return await append(deps, state, decision.events);
    } catch (caught) {
      let error = caught;
      if (error instanceof ConcurrencyError && receiptsMet < MAX_CONFLICT_RELOADS) {
        // A provider's receipt may be appended while the outcome waits (it can come before our
        // `success`). With only receipts in between, the attempt is still in flight and the
        // outcome is decided again on top of them; otherwise (a first try that did commit, or
        // another writer) the processor reloads as before, and the ConcurrencyError is thrown.
        let reloaded: MessageState | undefined;
        try {
          reloaded = (await deps.store.load(messageIdOf(from))).state;
        } catch (loadError) {
          // The reload failed (the database): the outcome is held and tried again, as when its
          // append fails, never handed back (the attempt would be taken as interrupted and sent again).
          error = loadError;
        }
        const again = reloaded && onlyReceiptsSince(from, reloaded) ? decide(reloaded, command) : undefined;
        if (reloaded && again && "events" in again) {
          receiptsMet++;
          state = reloaded;
          decision = again;
          continue;
        }
      }
      if (!gate || error instanceof ConcurrencyError || isConstraintViolation(error)) throw error;
      if (!held && state.status !== "initial") {
        deps.logger.warn(
          { err: error, messageId: state.message.id },
          "database error: holding a delivery outcome until it can be recorded",
        );
      }
      const left = holdUntil - performance.now();
      const retry =
        left > 0 &&
        (gate.reportFailure(error)
          ? await gate.waitUntilAvailable(left)
          : await gate.backOff(Math.min(gate.retryDelayMs, left)));
      if (!retry) throw error;
    }
  }
}

function messageIdOf(state: MessageState): string {
  if (state.status === "initial") throw new Error("unreachable: an outcome for a message never accepted");
  return state.message.id;
}

/**
 * Whether `now` is `before` with only receipts appended: the same status, attempt and retry
 * count, and a receipt's fold keeps everything but the version and the delivery.
 */
function onlyReceiptsSince(before: MessageState, now: MessageState): boolean {
  if (before.status !== "pending" || now.status !== "pending") return false;
  return (
    now.version > before.version &&
    now.attemptInFlight === before.attemptInFlight &&
    now.attempts === before.attempts &&
    now.retryCount === before.retryCount &&
    now.updatedAt === before.updatedAt
  );
}

export async function append(
  deps: RecordDeps,
  state: MessageState,
  events: MessageEvent[],
): Promise<MessageState> {
  // One statement, atomic on its own, shared (one commit) with the appends of other jobs.
  const next = await deps.store.append(state, events);
  if (isTerminal(next.status)) deps.metrics?.messageFinished(next);
  return next;
}
