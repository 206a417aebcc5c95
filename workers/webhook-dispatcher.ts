import { setTimeout as sleep } from "node:timers/promises";
import type { SqlClient } from "../db/client.js";
import {
  messageWebhookBody,
  nextWebhookAttempt,
  WEBHOOK_ATTEMPT_TIMEOUT_MS,
  WEBHOOK_FAILING_DISABLE_MS,
  webhookEventId,
} from "../src/domain/webhooks.js";
import { type OpenedSecrets, openEndpointSecrets, sendWebhook, signersAt } from "../src/messages/webhooks.js";
import type { Logger } from "../src/runtime/logger.js";
import type { AbortRequest, OutboundPost } from "../src/runtime/outbound/outbound-fetch.js";
import type { WebhookSecrets } from "../src/runtime/webhook-secrets.js";
import type { WebhookSigner } from "../src/runtime/webhook-signature.js";
import { createDayTables } from "../src/store/day-partitions.js";
import {
  type ClaimedDelivery,
  type ClaimedEndpoint,
  claimDueDeliveries,
  type DeliverySettlement,
  giveBackDeliveries,
  type HandedDelivery,
  releaseLeases,
  settleDeliveries,
} from "../src/store/webhook-deliveries.js";
import type { DatabaseGate } from "./database-gate.js";

/**
 * The webhook dispatcher (docs/decisions/0036): claims due deliveries from `webhook_deliveries`,
 * POSTs each event, signed, through the outbound guard, and settles what came of the attempts in
 * batches. A process-wide cap of attempts in flight and a per-endpoint one keep a slow or dead
 * endpoint to its own slots: it never holds up another endpoint's deliveries. The delivery
 * worker's appends hand it what they wrote ({@link WebhookHandoff}): those deliveries go out
 * without waiting for a claim.
 */

/** What the dispatcher reports to the metrics. */
export interface WebhookDispatcherMetrics {
  /** One attempt: `success`, or its error class (`http`, `redirect`, `timeout`, `connection`, `address_refused`, `secret_unreadable`). */
  webhookAttempt(outcome: string): void;
  /** A 2xx, `lagSeconds` after its event occurred. */
  webhookDelivered(lagSeconds: number): void;
}

export interface WebhookDispatcherDeps {
  sql: SqlClient;
  logger: Logger;
  secrets: WebhookSecrets;
  /** POST through the outbound guard (WEBHOOK_ALLOWED_NETWORKS), never following a redirect. */
  post: OutboundPost;
  newId: () => string;
  now: () => Date;
  random: () => number;
  /** Attempts in flight in this process, in all (WEBHOOK_CONCURRENCY). */
  concurrency: number;
  /** Attempts in flight in this process to one endpoint (WEBHOOK_ENDPOINT_CONCURRENCY). */
  endpointConcurrency: number;
  /** How long a claimed delivery is leased to this process; more than an attempt's time-out. */
  leaseMs?: number;
  attemptTimeoutMs?: number;
  /** The retry schedule: the unless a test passes a short one. */
  retryDelaysMs?: readonly number[];
  failingDisableMs?: number;
  /** The pause between claims while there is nothing to claim, growing from `min` to `max`. */
  idleMs?: { min: number; max: number };
  metrics?: WebhookDispatcherMetrics;
  /** The worker's database gate: no claims while it is closed, and it hears of outages. */
  database?: Pick<DatabaseGate, "available" | "reportFailure" | "waitUntilAvailable">;
}

export interface WebhookDispatcher {
  /** Stops claiming, lets attempts under way finish (at most `drainMs`, then aborts them), settles. */
  stop(drainMs?: number): Promise<void>;
  /** Attempts in flight now (tests). */
  readonly inFlight: number;
  /** What the delivery worker's appends hand this dispatcher. */
  readonly handoff: WebhookHandoff;
}

/**
 * The handoff (docs/decisions/0036, "The handoff"): an append made with `leaseMs`
 * (`writeAppendsHandingOff`) writes the deliveries nothing holds back already leased to this
 * process for that long, and returns them; once it has committed, they are handed here. The
 * dispatcher POSTs them at once where its slots allow, and gives back the rest, for any claim. What
 * it never gets (a crash after the commit, an answer lost) is claimed once the lease runs out:
 * late, never lost.
 */
export interface WebhookHandoff {
  /**
   * How long an append leases the deliveries it hands off: the dispatcher's lease, but at least an
   * attempt's time-out and 11 s (the time a handed delivery may take to be started).
   */
  readonly leaseMs: number;
  /** The deliveries of an append that has committed. */
  handOff(deliveries: readonly HandedDelivery[]): void;
}

export const DEFAULT_LEASE_MS = 30_000;
/** What the settle does after each step of the retry schedule. */
const RESULT_OF_STEP = {
  delivered: "delivered",
  retry: "retry",
  give_up: "given_up",
  disable_endpoint: "gone",
} as const satisfies Record<ReturnType<typeof nextWebhookAttempt>["step"], DeliverySettlement["result"]>;
const DEFAULT_IDLE = { min: 50, max: 250 };
const MAX_SETTLE_BATCH = 500;
const MIN_CLAIM_GAP_MS = 5;
/**
 * Settles are spaced by this much at least: under load each then records a few dozen attempts in
 * one statement rather than a handful (the statement's cost is mostly per call). Nothing waits on
 * a success's settle but its message's later events to the same endpoint.
 */
const MIN_SETTLE_GAP_MS = 20;
/**
 * Settles of nothing but handed successes, fewer than a batch, are spaced by this much at least:
 * nothing waits on them (a handed delivery is a final event, to an endpoint of final events only),
 * and each settle costs Postgres about a millisecond whatever it records (its planning, the
 * statement's fixed part), so under load five times fewer of them take a fifth of that. A row
 * delivered stays up to 80 ms longer in `webhook_deliveries`, leased, before it goes. A full
 * batch waiting goes at the shorter gap, so settles keep up with any pace of successes.
 */
const QUIET_SETTLE_GAP_MS = 100;

/** How long after the previous settle the next may start, given what waits to be settled. */
export function settleGapMs(waiting: number, allQuiet: boolean): number {
  return allQuiet && waiting < MAX_SETTLE_BATCH ? QUIET_SETTLE_GAP_MS : MIN_SETTLE_GAP_MS;
}
const MAX_ERROR_BACKOFF_MS = 5_000;
/** Failures in a row (not an outage) after which a batch is settled one outcome at a time, dropping what still fails. */
const POISON_FAILURES = 3;
const DEFAULT_DRAIN_MS = 5_000;
/** Opened secrets kept at most (a cache over every endpoint the process has POSTed to). */
const SECRET_CACHE_LIMIT = 10_000;
/** A handed delivery is POSTed only with its attempt's time-out and this much of its lease left. */
const HANDOFF_LEASE_MARGIN_MS = 1_000;
/**
 * A born lease leaves a handed delivery this long at least, after the attempt's time-out and the
 * margin, to be started (its append's own time, the event loop under load): with the shortest
 * WEBHOOK_LEASE_MS (11 s, a second over the time-out) it would have none, and every handed
 * delivery would be given back.
 */
const HANDOFF_START_WINDOW_MS = 10_000;

export function startWebhookDispatcher(deps: WebhookDispatcherDeps): WebhookDispatcher {
  const leaseMs = deps.leaseMs ?? DEFAULT_LEASE_MS;
  const timeoutMs = deps.attemptTimeoutMs ?? WEBHOOK_ATTEMPT_TIMEOUT_MS;
  const handoffLeaseMs = Math.max(leaseMs, timeoutMs + HANDOFF_LEASE_MARGIN_MS + HANDOFF_START_WINDOW_MS);
  const idle = deps.idleMs ?? DEFAULT_IDLE;
  const failingDisableMs = deps.failingDisableMs ?? WEBHOOK_FAILING_DISABLE_MS;
  if (leaseMs <= timeoutMs) throw new Error("the lease must outlast an attempt's time-out");

  const inFlightByEndpoint = new Map<string, number>();
  let inFlight = 0;
  /** Which day partitions the claims' details may read by name (src/store/day-partitions.ts). */
  const dayTables = createDayTables(deps.sql);
  const attempts = new Set<Promise<void>>();
  const outcomes: DeliverySettlement[] = [];
  /** The outcomes waiting to be settled whose slots stay taken until then (all but successes). */
  const holding = new Set<DeliverySettlement>();
  /** Whether the loop waits for slots (it is then woken as soon as a quarter of them is free). */
  let waitingForSlots = false;
  /**
   * Whether the loop waits after a claim that took less than it had slots for: what was due was
   * held back by the endpoints' caps (or by the order of a message's events), or nothing was due.
   * It is then woken as soon as an endpoint the last claim left at its cap frees a slot: a busy
   * endpoint's next deliveries do not wait for the next settle or the end of the pause (at 4
   * slots, a pause of 50 ms between claims would cap it at 80 a second). An endpoint the claim
   * gave fewer than its free slots had no more due: its releases wake nothing.
   */
  let pausedAfterClaim = false;
  /** The endpoints the last claim left at their cap (they may have more due). */
  let capped = new Set<string>();
  /** Whether one of them freed a slot since the claim began (the claim read the caps before). */
  let cappedFreed = false;
  const secretCache = new Map<string, { updatedAt: string; opened: OpenedSecrets }>();
  // Aborts of the attempts in flight (aborted at the end of a shutdown's drain): a set, not a
  // signal with a listener per attempt.
  const aborts = new Set<AbortRequest>();
  let aborted = false;
  const cancellable = (abort: AbortRequest) => {
    aborts.add(abort);
    return () => aborts.delete(abort);
  };
  let stopped = false;
  let settling: Promise<void> | undefined;
  /** Give-backs under way (a shutdown waits for them). */
  const givingBack = new Set<Promise<void>>();
  /** Set once `stop` is over: handed deliveries are left to their leases (Postgres may be closing). */
  let closed = false;
  /**
   * Successes of handed deliveries: their settle wakes no claim. Only the message's later events
   * to the same endpoint wait on it, and those are rare after the events a handoff carries (a
   * claim finds them at its next round).
   */
  const quiet = new WeakSet<DeliverySettlement>();
  let lastSettleAt = Number.NEGATIVE_INFINITY;

  let wake: (() => void) | undefined;
  /** Waits `ms`, or less when a batch settles (slots and later events of a message free up). */
  const pause = (ms: number) =>
    new Promise<void>((resolve) => {
      const timer = setTimeout(done, ms);
      function done() {
        clearTimeout(timer);
        wake = undefined;
        resolve();
      }
      wake = done;
    });

  function secretsFor(endpoint: ClaimedEndpoint): OpenedSecrets {
    const cached = secretCache.get(endpoint.id);
    if (cached && cached.updatedAt === endpoint.updatedAt) return cached.opened;
    const opened = openEndpointSecrets(deps.secrets, endpoint);
    if (secretCache.size >= SECRET_CACHE_LIMIT) secretCache.clear();
    secretCache.set(endpoint.id, { updatedAt: endpoint.updatedAt, opened });
    return opened;
  }

  /**
   * Makes one attempt; true when its outcome holds the delivery's slots until it is settled (a
   * failure), false when they are free at once (a success, or nothing to record).
   */
  async function attempt(delivery: ClaimedDelivery, wasHanded: boolean): Promise<boolean> {
    const { endpoint } = delivery;
    const eventId = webhookEventId(delivery.messageId, delivery.seq);
    const at = deps.now();
    // Made before the POST: its UUIDv7 time is the attempt's (attempts are listed by id).
    const attemptId = deps.newId();
    let sent: Pick<DeliverySettlement, "durationMs" | "statusCode" | "errorClass" | "errorCode">;
    let retryAfter: string | null = null;
    const body = messageWebhookBody(
      { messageId: delivery.messageId, organizationId: delivery.organizationId, ...delivery.message },
      delivery.event,
    );
    let signers: WebhookSigner[] | undefined;
    try {
      signers = signersAt(secretsFor(endpoint), at);
    } catch (error) {
      deps.logger.error({ err: error, endpointId: endpoint.id }, "webhook endpoint's secret does not open");
    }
    if (!signers || !body) {
      // Nothing can be sent: a secret sealed under another WEBHOOK_SECRET_KEY (rotate it), or an
      // event the fan-out should not have written. A failed attempt, on the schedule like any.
      sent = {
        durationMs: 0,
        statusCode: null,
        errorClass: signers ? "not_sendable" : "secret_unreadable",
        errorCode: signers ? "ERR_NOT_SENDABLE" : "ERR_SECRET_UNREADABLE",
      };
    } else {
      const answer = await sendWebhook(
        deps.post,
        endpoint.url,
        signers,
        { id: eventId, body: JSON.stringify(body) },
        at,
        timeoutMs,
        cancellable,
      );
      // Cut short by the shutdown: not the endpoint's doing, and not recorded; the lease runs out
      // and another process (or this one, restarted) tries again.
      if (aborted && answer.outcome.errorClass !== null) return false;
      retryAfter = answer.retryAfter;
      sent = { durationMs: answer.durationMs, ...answer.outcome };
    }
    const next = nextWebhookAttempt(
      delivery.attempts + 1,
      { statusCode: sent.statusCode, retryAfter },
      deps.random,
      deps.now(),
      deps.retryDelaysMs,
    );
    deps.metrics?.webhookAttempt(sent.errorClass ?? "success");
    // One literal of every field (no spreads): V8 builds its shape once, and the settle reads many.
    const outcome: DeliverySettlement = {
      deliveryId: delivery.id,
      endpointId: endpoint.id,
      organizationId: delivery.organizationId,
      attemptId,
      attemptsBefore: delivery.attempts,
      leasedUntil: delivery.leasedUntil,
      eventId,
      eventType: delivery.eventType,
      attemptedAt: at,
      durationMs: sent.durationMs,
      statusCode: sent.statusCode,
      errorClass: sent.errorClass,
      errorCode: sent.errorCode,
      result: RESULT_OF_STEP[next.step],
      retryAt: next.step === "retry" ? next.at : undefined,
    };
    outcomes.push(outcome);
    if (next.step === "delivered") {
      deps.metrics?.webhookDelivered(
        Math.max(0, (deps.now().getTime() - Date.parse(delivery.eventAt)) / 1000),
      );
      // Nothing waits on a success's settlement but the message's later events, which the claim
      // holds back while this row is there, untried (`attempts = 0`): its slots are free.
      if (wasHanded) quiet.add(outcome);
      return false;
    }
    holding.add(outcome);
    return true;
  }

  /**
   * Frees a delivery's slots once its attempt succeeded or had nothing to record, and a failed
   * one's once its outcome is settled: until then it counts against the caps, so that after a 410
   * or a failure the endpoint gets no new attempt from this process before the endpoint's state
   * and the message's order say whether it may.
   */
  function release(endpointId: string): void {
    inFlight--;
    const left = (inFlightByEndpoint.get(endpointId) ?? 1) - 1;
    if (left > 0) inFlightByEndpoint.set(endpointId, left);
    else inFlightByEndpoint.delete(endpointId);
    if (waitingForSlots && inFlight <= (deps.concurrency * 3) / 4) wake?.();
    else if (capped.has(endpointId)) {
      cappedFreed = true;
      if (pausedAfterClaim) wake?.();
    }
  }

  /** Frees the slots of settled (or abandoned) outcomes that held them. */
  function releaseHeld(settled: readonly DeliverySettlement[]): void {
    for (const outcome of settled) if (holding.delete(outcome)) release(outcome.endpointId);
  }

  /** Records an attempt that threw as failed, nothing sent (`not_sendable`); it holds its slots until settled. */
  function recordUnexpected(delivery: ClaimedDelivery): boolean {
    const at = deps.now();
    const next = nextWebhookAttempt(
      delivery.attempts + 1,
      { statusCode: null, retryAfter: null },
      deps.random,
      at,
      deps.retryDelaysMs,
    );
    deps.metrics?.webhookAttempt("not_sendable");
    const outcome: DeliverySettlement = {
      deliveryId: delivery.id,
      endpointId: delivery.endpointId,
      organizationId: delivery.organizationId,
      attemptId: deps.newId(),
      attemptsBefore: delivery.attempts,
      leasedUntil: delivery.leasedUntil,
      eventId: webhookEventId(delivery.messageId, delivery.seq),
      eventType: delivery.eventType,
      attemptedAt: at,
      durationMs: 0,
      statusCode: null,
      errorClass: "not_sendable",
      errorCode: "ERR_UNEXPECTED",
      ...(next.step === "retry" ? { result: "retry", retryAt: next.at } : { result: "given_up" }),
    };
    outcomes.push(outcome);
    holding.add(outcome);
    return true;
  }

  function start(delivery: ClaimedDelivery, wasHanded = false): void {
    const endpointId = delivery.endpointId;
    inFlight++;
    inFlightByEndpoint.set(endpointId, (inFlightByEndpoint.get(endpointId) ?? 0) + 1);
    const running: Promise<void> = attempt(delivery, wasHanded)
      .catch((error: unknown) => {
        // A bug, not an endpoint's failure: recorded as a failed attempt (nothing sent), so that it
        // follows the retry schedule and does not hold back its message's later events forever.
        deps.logger.error({ err: error, deliveryId: delivery.id }, "webhook attempt failed unexpectedly");
        return recordUnexpected(delivery);
      })
      .then((holds) => {
        if (!holds) release(endpointId);
        attempts.delete(running);
        settleSoon();
      });
    attempts.add(running);
  }

  /** Settles what has come in, a batch at a time, while more keeps coming (one settle at a time). */
  function settleSoon(): void {
    settling ??= settleAll().finally(() => {
      settling = undefined;
      if (outcomes.length > 0 && !stopped) settleSoon();
    });
  }

  async function settleAll(): Promise<void> {
    let failures = 0;
    /** Failures in a row that were not an outage. */
    let refusals = 0;
    while (outcomes.length > 0) {
      const gap = settleGapMs(
        outcomes.length,
        outcomes.every((outcome) => quiet.has(outcome)),
      );
      const wait = lastSettleAt + gap - performance.now();
      if (wait > 0 && !stopped) {
        // In steps of the shorter gap: an outcome that something waits on may come meanwhile.
        await sleep(Math.min(wait, MIN_SETTLE_GAP_MS));
        continue;
      }
      lastSettleAt = performance.now();
      const batch = outcomes.splice(0, MAX_SETTLE_BATCH);
      try {
        const disabled = await settleDeliveries(deps.sql, batch, { now: deps.now(), failingDisableMs });
        failures = 0;
        refusals = 0;
        releaseHeld(batch);
        for (const { endpointId, reason } of disabled) {
          deps.logger.warn({ endpointId, reason }, "webhook endpoint disabled");
        }
        if (batch.some((outcome) => !quiet.has(outcome))) wake?.();
      } catch (error) {
        outcomes.unshift(...batch);
        failures++;
        // At shutdown, a few tries: what is not settled is tried again once its lease is over.
        if (stopped && failures >= 3) {
          deps.logger.warn(
            { err: error, unsettled: outcomes.length },
            "webhook attempts left unsettled at shutdown",
          );
          releaseHeld(outcomes.splice(0));
          return;
        }
        if (deps.database?.reportFailure(error)) {
          await deps.database.waitUntilAvailable(MAX_ERROR_BACKOFF_MS);
        } else if (++refusals >= POISON_FAILURES) {
          // Not an outage, and again and again: this batch must not stay at the head for ever.
          deps.logger.warn(
            { err: error, failures },
            "settling webhook attempts keeps failing; settling them one by one",
          );
          outcomes.splice(0, batch.length);
          refusals = 0;
          await settleEachOrDrop(batch);
        } else {
          if (failures === 1 || failures % 20 === 0) {
            deps.logger.warn({ err: error, failures }, "settling webhook attempts failed; retrying");
          }
          await sleep(Math.min(MAX_ERROR_BACKOFF_MS, 50 * 2 ** failures));
        }
      }
    }
  }

  /**
   * Settles a batch that keeps failing one outcome at a time, dropping (logged, slots released)
   * each that fails again for any reason but an outage: its lease runs out and it is tried again
   * (at least once). Outcomes left when the database goes away go back at the head of the queue.
   */
  async function settleEachOrDrop(batch: DeliverySettlement[]): Promise<void> {
    for (const [index, outcome] of batch.entries()) {
      try {
        const disabled = await settleDeliveries(deps.sql, [outcome], { now: deps.now(), failingDisableMs });
        for (const { endpointId, reason } of disabled) {
          deps.logger.warn({ endpointId, reason }, "webhook endpoint disabled");
        }
      } catch (error) {
        if (deps.database?.reportFailure(error)) {
          outcomes.unshift(...batch.slice(index));
          return;
        }
        deps.logger.error(
          { err: error, deliveryId: outcome.deliveryId, attemptId: outcome.attemptId },
          "webhook attempt could not be settled; dropped (its lease will run out)",
        );
      }
      releaseHeld([outcome]);
    }
    wake?.();
  }

  /** Whether one more attempt to `endpointId` fits the process's cap and the endpoint's. */
  function hasSlot(endpointId: string): boolean {
    return (
      inFlight < deps.concurrency && (inFlightByEndpoint.get(endpointId) ?? 0) < deps.endpointConcurrency
    );
  }

  /**
   * Starts each delivery of a committed append (see {@link WebhookHandoff}) that has a free slot,
   * in all and at its endpoint, and enough of its lease left for an attempt (an append that took
   * most of it: its POST could outlast it, and another process claim it meanwhile); gives back the
   * others (due at once, for any claim). While it stops, it gives back all; once stopped for good,
   * they are left to their leases.
   */
  function handOff(deliveries: readonly HandedDelivery[]): void {
    if (closed) return;
    const givenBack: number[] = [];
    // A lease that ends before an attempt started now would.
    const tooShort = performance.now() + timeoutMs + HANDOFF_LEASE_MARGIN_MS;
    for (const delivery of deliveries) {
      if (!stopped && delivery.leaseEndsAt > tooShort && hasSlot(delivery.endpointId)) start(delivery, true);
      else givenBack.push(delivery.id);
    }
    if (givenBack.length === 0) return;
    const giving: Promise<void> = giveBackDeliveries(deps.sql, givenBack, handoffLeaseMs)
      // Where this fails, their leases run out instead.
      .catch((error: unknown) => {
        deps.database?.reportFailure(error);
      })
      .then(() => {
        givingBack.delete(giving);
        wake?.();
      });
    givingBack.add(giving);
  }

  const loop = (async () => {
    let idleMs = idle.min;
    let lastClaimAt = Number.NEGATIVE_INFINITY;
    let failures = 0;
    /** Whether the last claim took all it asked for: more is due, held back only by the slots. */
    let backlog = false;
    /** Where the last claim stopped in its round of the endpoints: the next starts after it. */
    let cursor: string | null = null;
    while (!stopped) {
      if (deps.database && !deps.database.available) {
        await deps.database.waitUntilAvailable(idle.max);
        continue;
      }
      const free = deps.concurrency - inFlight;
      // With a backlog, a claim waits for a quarter of the slots to be free (a few attempts'
      // time): fewer, bigger claims for the same deliveries per second. Slots held by slow
      // attempts are not waited for longer than `idle.min`, once.
      if (free <= 0 || (backlog && free < deps.concurrency / 4)) {
        waitingForSlots = true;
        await pause(free <= 0 ? idle.max : idle.min);
        waitingForSlots = false;
        backlog = false;
        continue;
      }
      // Settles come every few milliseconds under load, each waking the loop: claims are spaced
      // by a few milliseconds at least, so that each takes what several settles freed.
      const sinceLastClaim = performance.now() - lastClaimAt;
      if (sinceLastClaim < MIN_CLAIM_GAP_MS) await sleep(MIN_CLAIM_GAP_MS - sinceLastClaim);
      lastClaimAt = performance.now();
      const inFlightBefore = new Map(inFlightByEndpoint);
      cappedFreed = false;
      let claimed: ClaimedDelivery[];
      try {
        const claim = await claimDueDeliveries(deps.sql, {
          limit: free,
          perEndpoint: deps.endpointConcurrency,
          inFlight: inFlightByEndpoint,
          leaseMs,
          after: cursor,
          dayTables,
        });
        claimed = claim.deliveries;
        cursor = claim.cursor;
        failures = 0;
      } catch (error) {
        failures++;
        if (!deps.database?.reportFailure(error) && (failures === 1 || failures % 20 === 0)) {
          deps.logger.warn({ err: error, failures }, "claiming webhook deliveries failed; retrying");
        }
        await pause(Math.min(MAX_ERROR_BACKOFF_MS, idle.min * 2 ** Math.min(failures, 10)));
        continue;
      }
      // The claim counted the slots before it began; handoffs may have taken some meanwhile. What
      // no longer fits is given back at once (rare: a handoff and a claim for one endpoint at once).
      const over: ClaimedDelivery[] = [];
      for (const delivery of claimed) {
        if (hasSlot(delivery.endpointId)) start(delivery);
        else over.push(delivery);
      }
      if (over.length > 0) {
        await releaseLeases(deps.sql, over).catch((error: unknown) => {
          // Where this fails, their leases run out instead.
          deps.database?.reportFailure(error);
        });
      }
      capped = cappedAfter(inFlightBefore, claimed, deps.endpointConcurrency);
      if (stopped) break;
      backlog = claimed.length === free;
      if (backlog || cappedFreed) {
        idleMs = idle.min;
      } else {
        // What is left is held by the caps or by the order of a message's events (a settle, or a
        // capped endpoint's freed slot, frees it), or nothing is due: the pause grows.
        pausedAfterClaim = true;
        await pause(claimed.length > 0 ? idle.min : idleMs);
        pausedAfterClaim = false;
        idleMs = claimed.length > 0 ? idle.min : Math.min(idle.max, idleMs * 2);
      }
    }
  })();

  return {
    get inFlight() {
      return inFlight;
    },
    handoff: { leaseMs: handoffLeaseMs, handOff },
    async stop(drainMs = DEFAULT_DRAIN_MS) {
      stopped = true;
      wake?.();
      await loop;
      if (attempts.size > 0) {
        let timer: NodeJS.Timeout | undefined;
        await Promise.race([
          Promise.all([...attempts]),
          new Promise((resolve) => {
            timer = setTimeout(resolve, drainMs);
          }),
        ]);
        clearTimeout(timer);
        aborted = true;
        for (const abort of aborts) abort(new DOMException("the dispatcher stopped", "AbortError"));
        await Promise.all([...attempts]);
      }
      await settling;
      if (outcomes.length > 0) await settleAll();
      // Handoffs may come while it waits (jobs finishing): their give-backs are waited for too.
      while (givingBack.size > 0) await Promise.all([...givingBack]);
      closed = true;
    },
  };
}

/**
 * The endpoints a claim left at their cap: those already full when it began (`inFlightBefore`)
 * and those it gave as many deliveries as they had free slots.
 */
function cappedAfter(
  inFlightBefore: ReadonlyMap<string, number>,
  claimed: readonly ClaimedDelivery[],
  cap: number,
): Set<string> {
  const taken = new Map(inFlightBefore);
  for (const { endpointId } of claimed) taken.set(endpointId, (taken.get(endpointId) ?? 0) + 1);
  const capped = new Set<string>();
  for (const [endpointId, count] of taken) if (count >= cap) capped.add(endpointId);
  return capped;
}
