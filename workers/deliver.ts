import { DelayedError, type Job } from "bullmq";
import type { Database } from "../db/client.js";
import type { DeliveryOutcome } from "../src/domain/delivery-outcome.js";
import { type Command, decide, isTerminal, type MessageState } from "../src/domain/message.js";
import type { RetryPolicy } from "../src/domain/retry-policy.js";
import type { Logger } from "../src/logger.js";
import type { DeliveryJobData } from "../src/messages/delivery-queue.js";
import { appendEvents, ConcurrencyError, loadMessage } from "../src/messages/event-store.js";
import { findOrganization } from "../src/organizations/store.js";
import type { SmsProvider } from "./providers/sms-provider.js";

export interface DeliverDeps {
  db: Database;
  provider: SmsProvider;
  policy: RetryPolicy;
  logger: Logger;
  now: () => Date;
  random: () => number;
}

const MAX_CONFLICT_RELOADS = 3;

/**
 * The BullMQ processor for one message: it loads the message's events, asks the domain what to
 * do, records that, and calls the provider. Retries are scheduled by the domain and carried out
 * by moving this same job to the delayed set; a thrown error means infrastructure trouble
 * (database down) and lets BullMQ retry the job without counting a delivery attempt.
 */
export function createDeliveryProcessor(deps: DeliverDeps) {
  return async function deliver(job: Job<DeliveryJobData>, token?: string): Promise<void> {
    for (let reload = 0; ; reload++) {
      try {
        const dueAt = await deliverOnce(deps, job.data.messageId);
        if (dueAt !== undefined) {
          await job.moveToDelayed(dueAt, token);
          throw new DelayedError();
        }
        return;
      } catch (error) {
        // Someone else appended to this message first (a stalled job running twice): reload.
        if (error instanceof ConcurrencyError && reload < MAX_CONFLICT_RELOADS) continue;
        throw error;
      }
    }
  };
}

/** Moves one message forward as far as it can go now. Returns when the job should run again, if it should. */
async function deliverOnce(deps: DeliverDeps, messageId: string): Promise<number | undefined> {
  const { db, logger } = deps;
  let state = await loadMessage(db, messageId);
  if (state.status === "initial") {
    logger.warn({ messageId }, "delivery job for a message with no events; dropping it");
    return undefined;
  }
  if (isTerminal(state.status)) return undefined;

  if (state.status === "accepted") {
    const organization = await findOrganization(db, state.message.organizationId);
    if (!organization?.active) {
      await record(deps, state, {
        type: "reject_before_send",
        reason: "organization_inactive",
        now: deps.now(),
      });
      return undefined;
    }
  }

  const start = decide(state, {
    type: "start_attempt",
    now: deps.now(),
    policy: deps.policy,
    random: deps.random(),
  });
  if (!("events" in start)) {
    if (start.refused === "not_due") return Date.parse(start.dueAt);
    if (start.refused === "already_final") return undefined;
    throw new Error(`cannot start an attempt for ${messageId}: ${start.reason}`);
  }
  state = await db.transaction((tx) => appendEvents(tx, state, start.events));
  if (state.status !== "pending" || !state.attemptInFlight) return undefined;

  const { message, attempts } = state;
  const outcome = await sendSafely(deps.provider, {
    messageId,
    to: message.recipient,
    from: message.sender,
    body: message.body,
    attempt: attempts,
  });
  state = await record(deps, state, {
    type: "record_outcome",
    attempt: attempts,
    outcome,
    now: deps.now(),
    policy: deps.policy,
    random: deps.random(),
  });
  logger.debug({ messageId, attempt: attempts, status: state.status }, "delivery attempt recorded");
  return state.status === "pending" && state.nextAttemptAt ? Date.parse(state.nextAttemptAt) : undefined;
}

async function record(deps: DeliverDeps, state: MessageState, command: Command): Promise<MessageState> {
  const decision = decide(state, command);
  if (!("events" in decision)) {
    throw new Error(`cannot record ${command.type}: ${JSON.stringify(decision)}`);
  }
  return deps.db.transaction((tx) => appendEvents(tx, state, decision.events));
}

/** A provider must not throw; if one does anyway, that is a transient failure, not a crash. */
async function sendSafely(
  provider: SmsProvider,
  message: Parameters<SmsProvider["send"]>[0],
): Promise<DeliveryOutcome> {
  try {
    return await provider.send(message);
  } catch (error) {
    const text = error instanceof Error ? error.message : String(error);
    return {
      ok: false,
      provider: provider.name,
      error: { class: "transient", code: "provider_exception", message: text },
    };
  }
}
