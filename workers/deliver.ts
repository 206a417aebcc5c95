import { DelayedError, type Job } from "bullmq";
import type { Database } from "../db/client.js";
import type { Prepared } from "../src/channels/channel.js";
import { RenderAbandonedError, RenderBusyError } from "../src/channels/email/templates/render-error.js";
import { type Providers, prepareDelivery, providerFor } from "../src/channels/index.js";
import type { ProviderReservation } from "../src/channels/providers/provider.js";
import { type Command, decide, type Refusal, startsAnAttempt } from "../src/domain/decide.js";
import type { DeliveryOutcome } from "../src/domain/delivery-outcome.js";
import type { MessageContent } from "../src/domain/events.js";
import type { RetryPolicy } from "../src/domain/retry-policy.js";
import { fold } from "../src/domain/state.js";
import { suppressionReasonOf } from "../src/domain/suppression.js";
import type { Metrics } from "../src/observability/metrics.js";
import type { Logger } from "../src/runtime/logger.js";
import { isContentErased } from "../src/store/content.js";
import type { DeliveryJobData } from "../src/store/delivery-queue.js";
import { ConcurrencyError } from "../src/store/events.js";
import { suppressRecipients } from "../src/store/suppressions.js";
import type { DatabaseGate } from "./database-gate.js";
import type { DeliveryStore } from "./delivery-store.js";
import { countProviderErrors, logOutcome, sendSafely } from "./provider-call.js";
import { append, MAX_CONFLICT_RELOADS, recordHeld } from "./record-outcome.js";
import { type Admission, type ThroughputLimits, ThroughputWait } from "./throughput-limits.js";

export interface DeliverDeps {
  db: Database;
  /** The message's events and record: loads and appends grouped with the other jobs'. */
  store: DeliveryStore;
  providers: Providers;
  policy: RetryPolicy;
  logger: Logger;
  now: () => Date;
  random: () => number;
  metrics?: Pick<Metrics, "messageFinished" | "providerError" | "throughputWait" | "throughputRetake">;
  /**
   * Postgres reachability. With it, a job that meets an unavailable database is handed back
   * (delayed, no attempt counted) and an outcome the provider already gave is held until it can
   * be recorded; without it, such errors are thrown to BullMQ.
   */
  database?: Pick<
    DatabaseGate,
    "available" | "retryDelayMs" | "reportFailure" | "waitUntilAvailable" | "backOff"
  >;
  /**
   * Throughput limits per SMS sender id and provider account (docs/decisions/0048), shared by
   * every worker. A message over one is handed back until its turn, nothing appended.
   */
  throughput?: Pick<ThroughputLimits, "admit" | "refresh">;
}

/**
 * The BullMQ processor for one message: it loads the message's events, asks the domain what to
 * do, records that, and calls the provider. Retries are scheduled by the domain and carried out
 * by moving this same job to the delayed set; a thrown error means infrastructure trouble
 * (database down) and lets BullMQ retry the job without counting a delivery attempt.
 */
export function createDeliveryProcessor(deps: DeliverDeps) {
  const gate = deps.database;
  /**
   * Gives the job back for later without counting anything: the database is unreachable, the
   * template sandbox will not take the e-mail's render now, or a throughput limit holds it back.
   */
  async function handBack(
    job: Job<DeliveryJobData>,
    token: string | undefined,
    delayMs = gate?.retryDelayMs ?? 1000,
  ): Promise<never> {
    await job.moveToDelayed(Date.now() + delayMs, token);
    throw new DelayedError();
  }

  return async function deliver(job: Job<DeliveryJobData>, token?: string): Promise<void> {
    if (gate && !gate.available) return handBack(job, token);
    for (let reload = 0; ; reload++) {
      let dueAt: number | undefined;
      try {
        dueAt = await deliverOnce(deps, job.data);
      } catch (error) {
        // Someone else appended to this message first (a stalled job running twice): reload.
        if (error instanceof ConcurrencyError && reload < MAX_CONFLICT_RELOADS) continue;
        // The organization's renders are queued up (or the message's time to live passed while
        // its render waited): nothing was recorded, and waiting here would hold a delivery slot
        // that another organization's SMS needs. Jitter spreads a burst's returns.
        if (error instanceof RenderBusyError) {
          deps.logger.debug(
            { messageId: job.data.messageId, err: error },
            "render queue busy: job handed back",
          );
          return handBack(job, token, Math.round(error.retryAfterMs * (1 + deps.random())));
        }
        if (error instanceof RenderAbandonedError) return handBack(job, token, 0);
        // Over a sender's or an account's rate: back to the queue until its turn, which the job
        // keeps so it comes back to it (docs/decisions/0048). Nothing was recorded.
        if (error instanceof ThroughputWait) {
          const { channel, senderKind, provider } = error.labels;
          deps.metrics?.throughputWait(channel, error.limit, senderKind, provider);
          deps.logger.debug(
            { messageId: job.data.messageId, limit: error.limit, waitMs: error.waitMs },
            "throughput limit: job handed back",
          );
          const { turn } = error;
          if (turn && (job.data.throughput?.key !== turn.key || job.data.throughput.turn !== turn.turn)) {
            // A turn not kept costs the message its place in line, nothing more.
            await job.updateData({ ...job.data, throughput: turn }).catch(() => undefined);
          }
          return handBack(job, token, error.waitMs);
        }
        // Only database calls throw in there (the provider never does), so this is Postgres.
        if (gate?.reportFailure(error)) return handBack(job, token);
        throw error;
      }
      if (dueAt !== undefined) {
        await job.moveToDelayed(dueAt, token);
        throw new DelayedError();
      }
      return;
    }
  };
}

/**
 * Moves one message forward as far as it can go now. Returns when the job should run again, if
 * it should. It gathers the facts the domain asks for and carries out what it decides.
 */
async function deliverOnce(deps: DeliverDeps, job: DeliveryJobData): Promise<number | undefined> {
  const { logger } = deps;
  const { messageId } = job;
  // The events and the organization's active flag in one query, shared with other jobs starting now.
  const loaded = await deps.store.load(messageId);
  let state = loaded.state;
  if (state.status === "initial") {
    logger.warn({ messageId }, "delivery job for a message with no events; dropping it");
    return undefined;
  }
  const start = {
    type: "start_attempt",
    now: deps.now(),
    policy: deps.policy,
    random: deps.random(),
    organizationActive: loaded.organizationActive,
    ...(loaded.suppression && { suppression: loaded.suppression }),
  } satisfies Command;
  let decision = decide(state, start);
  let prepared: Prepared | undefined;
  /** With a provider list: the call the attempt makes first, reserved before the attempt is recorded. */
  let reservation: ProviderReservation | undefined;
  if (!("events" in decision) && decision.refused === "preparation_needed") {
    if (isContentErased(state.message)) prepared = CONTENT_ERASED;
    else {
      // Every provider of the message's list skipped (their breakers open): no attempt is spent on
      // nobody; the job comes back when one may be called (docs/decisions/0046). A cheap look
      // before the preparation, which may render a template; the reservation below decides.
      const readyInMs = providerFor(deps.providers, state.message).readyInMs?.() ?? 0;
      if (readyInMs > 0) return heldForProviders(deps, state.message, start.now, readyInMs);
      // Asked for only when an attempt would really start: preparing may render a template.
      prepared = await prepareDelivery(
        { ...deps, isSuppressed: loaded.suppression?.isSuppressed },
        state.message,
      );
    }
    // The second ask has the same facts plus the preparation, on the clock as it is now: a slow
    // preparation (an e-mail's render) may have taken the message past its time to live, and then
    // the domain ends it rather than start an attempt no provider may be called for.
    const now = deps.now();
    decision = decide(state, { ...start, now, preparation: prepared });
    if (prepared.ready && "events" in decision && startsAnAttempt(decision.events)) {
      // A provider list's first call is reserved before the attempt is recorded: jobs that met a
      // breaker as its cool-down ended all passed the look above, and only one gets the probe;
      // the others are handed back with nothing recorded, never an attempt spent on nobody.
      const provider = providerFor(deps.providers, state.message);
      if (provider.reserve) {
        const after = fold(decision.events, state);
        reservation = provider.reserve(after.status === "pending" ? after.failedOn : undefined);
        if (!reservation)
          return heldForProviders(deps, state.message, now, Math.max(1, provider.readyInMs?.() ?? 0));
      }
    }
  }
  if (!("events" in decision)) return afterRefusal(decision, messageId);
  let outcome: DeliveryOutcome;
  let admission: Admission | undefined;
  try {
    // The attempt starts now unless a throughput limit holds it back (a ThroughputWait): before its
    // `pending` is appended, so a wait counts no attempt and spends no retry (the reservation of a
    // provider list's first call is given back below). With a list, the account limited is the
    // one reserved: the account the attempt goes to first.
    if (prepared?.ready && deps.throughput && startsAnAttempt(decision.events)) {
      const account = reservation?.provider ?? prepared.provider;
      admission = await deps.throughput.admit(state.message, account, {
        turn: job.throughput,
        now: start.now,
      });
    }
    state = await append(deps, state, decision.events);
    // The domain starts an attempt only with the message prepared; otherwise the message ended.
    if (!prepared?.ready || state.status !== "pending" || !state.attemptInFlight) return undefined;
    // A token that went stale while `pending` was recorded (a slow commit) is taken again, so a
    // stalled database does not release a burst to the provider.
    if (admission && deps.throughput) {
      const { channel, senderKind, provider } = admission.labels;
      for (const limit of await deps.throughput.refresh(admission)) {
        deps.metrics?.throughputRetake(channel, limit.name, senderKind, provider);
      }
    }
    // A provider list tries last the providers the previous attempt failed on, and calls no further
    // provider once the message's time to live is over.
    outcome = await sendSafely(prepared, state.attempts, {
      ...(state.failedOn && { triedLast: state.failedOn }),
      deadline: Date.parse(state.message.expiresAt),
      ...(reservation && { reservation }),
    });
  } finally {
    // Given back when the attempt did not start (a conflict, the database); once used, a no-op.
    reservation?.release();
  }

  const { attempts, message } = state;
  countProviderErrors(deps.metrics, message, outcome);
  logOutcome(logger, messageId, attempts, outcome);
  state = await recordHeld(deps, state, {
    type: "record_outcome",
    attempt: attempts,
    outcome,
    now: deps.now(),
    policy: deps.policy,
    random: deps.random(),
  });
  logger.debug({ messageId, attempt: attempts, status: state.status }, "delivery attempt recorded");
  await suppressAfter(deps, message, outcome);
  return state.status === "pending" && state.nextAttemptAt ? Date.parse(state.nextAttemptAt) : undefined;
}

/**
 * A provider's refusal that says the recipient will never take a message (a push subscription
 * gone, an SMS recipient's STOP) puts it on the organization's suppression list
 * (docs/decisions/0039). The outcome is already recorded: a failure here is logged, not retried
 * (the provider refuses the next message the same way, which adds it then).
 */
async function suppressAfter(
  deps: DeliverDeps,
  message: MessageContent,
  outcome: DeliveryOutcome,
): Promise<void> {
  const reason = suppressionReasonOf(message.channel, outcome);
  if (!reason) return;
  try {
    await suppressRecipients(deps.db, deps.store.content, message.organizationId, [
      { channel: message.channel, recipient: message.recipient, reason, messageId: message.id },
    ]);
  } catch (error) {
    deps.logger.warn(
      { err: error, messageId: message.id, reason },
      "could not add the recipient to the suppression list",
    );
  }
}

/** How much later than a provider list's own wait a held job comes back, at most (spreads them). */
const PROVIDER_WAIT_JITTER_MS = 1000;

/**
 * When a job should come back because no provider of the message's list may be called now (every
 * breaker open, or half-open with its probe under way: ready in `readyInMs`): then, plus jitter so
 * the jobs held together do not all come back at once, and never later than just past the
 * message's time to live (the domain then fails it).
 */
function heldForProviders(deps: DeliverDeps, message: MessageContent, now: Date, readyInMs: number): number {
  const untilExpiry = Date.parse(message.expiresAt) - now.getTime();
  const wait = Math.min(
    readyInMs + Math.round(deps.random() * PROVIDER_WAIT_JITTER_MS),
    Math.max(0, untilExpiry) + 1,
  );
  deps.logger.debug({ messageId: message.id, waitMs: wait }, "every provider's breaker is open: job held");
  return now.getTime() + wait;
}

/** A message whose content was erased before its delivery has nothing left to send. */
const CONTENT_ERASED: Prepared = {
  ready: false,
  reason: "content_erased",
  error: { class: "rejected", code: "content_erased", message: "the message's content was erased" },
};

/** What the domain's refusal to start an attempt means for the job: when to run again, if ever. */
function afterRefusal(refusal: Refusal, messageId: string): number | undefined {
  switch (refusal.refused) {
    case "not_due":
      return Date.parse(refusal.dueAt);
    case "already_final":
      return undefined;
    case "illegal":
      throw new Error(`cannot start an attempt for ${messageId}: ${refusal.reason}`);
    case "preparation_needed": // only ever after the preparation was given
      throw new Error(`cannot start an attempt for ${messageId}: preparation asked for twice`);
    default: {
      const never: never = refusal;
      throw new Error(`unknown refusal ${JSON.stringify(never)}`);
    }
  }
}
