import { setTimeout as sleep } from "node:timers/promises";
import type { Channel, MessageContent } from "../src/domain/events.js";
import type { Config } from "../src/runtime/config.js";
import type { Logger } from "../src/runtime/logger.js";
import { smsSenderKind, smsSenderLimitKey } from "../src/runtime/sms-sender-id.js";
import type { DeliveryJobData } from "../src/store/delivery-queue.js";
import type { LineMode, Take, ThroughputLimiter } from "./throughput-limiter.js";

/**
 * Which throughput limits a delivery attempt is under, and taking their tokens before it starts
 * (docs/decisions/0048). An SMS is under its sender id's limit (`SMS_SENDER_RATES`, else
 * `SMS_SENDER_RATE`) and then its provider account's (`SMS_PROVIDER_RATE`); an e-mail under its
 * provider account's (`EMAIL_PROVIDER_RATE`). A message over a limit is not failed: its job is
 * handed back until its turn, and no attempt is counted.
 */

export type ThroughputSettings = Pick<
  Config,
  "QUEUE_PREFIX" | "SMS_SENDER_RATE" | "SMS_SENDER_RATES" | "SMS_PROVIDER_RATE" | "EMAIL_PROVIDER_RATE"
>;

/**
 * Messages a second through one provider account, by channel; a channel without an entry has no
 * account limit. One line per channel: push services publish no per-sender rate to pace to.
 */
const ACCOUNT_RATES: Partial<Record<Channel, (settings: ThroughputSettings) => number>> = {
  sms: (settings) => settings.SMS_PROVIDER_RATE,
  email: (settings) => settings.EMAIL_PROVIDER_RATE,
};

/**
 * A handed-back job comes back this long before its turn: BullMQ promotes a delayed job when a
 * worker's blocking pop times out, and Redis checks those time-outs `hz` times a second (10 by
 * default), so the job is up to 100 ms late (measured: 39 ms median, 88 ms at p90). It then
 * waits out the rest of its turn in process (a hold), so the limit's turns are kept to the
 * millisecond instead of lost to that lateness.
 */
export const EARLY_RETURN_MS = 100;
/** The longest hold: a wait beyond it hands the job back (the delivery slot is never held longer). */
export const MAX_HOLD_MS = 200;
/** Holds in a row for one take (a turn moved by another's send); then the job is handed back. */
const MAX_HOLDS = 3;

/** What held a message back: a sender id's limit, its provider account's, or a limiter that did not answer. */
export type ThroughputLimitName = "sms_sender" | "provider_account" | "unavailable";

/** One limit a message is under: its Redis key and its rate. */
export interface ThroughputLimit {
  name: Exclude<ThroughputLimitName, "unavailable">;
  key: string;
  rate: number;
}

/** The turn a limit gave a message, kept in its job so it comes back to it (`DeliveryJobData.throughput`). */
export type ThroughputTurn = NonNullable<DeliveryJobData["throughput"]>;

/**
 * A delivery that must wait for a throughput limit: its job is handed back for `waitMs`, nothing
 * appended. Thrown before the attempt's `pending` event, like the render pool's RenderBusyError.
 */
export class ThroughputWait extends Error {
  constructor(
    readonly waitMs: number,
    readonly limit: ThroughputLimitName,
    /** The turn to keep in the job; undefined when none was booked (it expires first, or Redis is away). */
    readonly turn: ThroughputTurn | undefined,
    /** The metric's labels: the channel, the SMS sender's kind (`none` for other channels), the account. */
    readonly labels: { channel: Channel; senderKind: string; provider: string },
  ) {
    super(`held back by the ${limit} throughput limit for ${waitMs} ms`);
    this.name = "ThroughputWait";
  }
}

/**
 * The tokens an admitted attempt took, each with when it was granted (`performance.now()`), for
 * {@link ThroughputLimits.refresh} after the attempt's `pending` is recorded.
 */
export interface Admission {
  tokens: Array<{ limit: ThroughputLimit; grantedAt: number }>;
  /** The message's time left to live, in ms, on the clock as it is when asked. */
  deadlineMs: () => number;
  /** The metrics' labels, as {@link ThroughputWait}'s. */
  labels: ThroughputWait["labels"];
}

/**
 * How old a token may be at the provider call before it is taken again: one interval of its limit,
 * and not under 100 ms, so appends of ordinary length never cost a token at high rates. Sends then
 * reach the provider at most this long after their tokens: over a window W, at most
 * (W + this) × rate + 1 + tolerance × rate of them (52 in 5 s at 10/s).
 */
export function staleAfterMs(limit: Pick<ThroughputLimit, "rate">): number {
  return Math.max(1000 / limit.rate, 100);
}

/** The longest a recorded attempt waits for fresh tokens; then it is sent with those it has. */
export const MAX_REFRESH_WAIT_MS = 10_000;

/** How long a delivery waits when the limiter's Redis does not answer (fail closed: no send over a limit). */
export const LIMITER_UNAVAILABLE_WAIT_MS = 1000;

export function createThroughputLimits(deps: {
  settings: ThroughputSettings;
  /** Absent: no limits at all. */
  limiter?: ThroughputLimiter;
  /**
   * How many deliveries of this process may hold their slot waiting for a turn at once (each for
   * at most {@link MAX_HOLD_MS}); beyond, they are handed back at once. 0: never hold.
   */
  holdSlots: number;
  logger: Logger;
  random: () => number;
}) {
  const { settings, limiter } = deps;
  const prefix = `${settings.QUEUE_PREFIX}:throughput`;
  let holding = 0;
  let lastWarnedAt = 0;

  /** Logs a limiter that does not answer, at most once every ten seconds. */
  function warnUnavailable(error: unknown, text: string): void {
    if (Date.now() - lastWarnedAt <= 10_000) return;
    lastWarnedAt = Date.now();
    deps.logger.warn({ err: error }, text);
  }

  /** The limits an attempt of `message` through provider account `account` is under, in the order they are taken. */
  function limitsOf(message: MessageContent, account: string): ThroughputLimit[] {
    const limits: ThroughputLimit[] = [];
    if (message.channel === "sms") {
      const sender = smsSenderLimitKey(message.sender);
      const rate = settings.SMS_SENDER_RATES.get(sender) ?? settings.SMS_SENDER_RATE;
      // Keyed by the sender alone: one sender id is one limit, whichever organization uses it.
      if (rate > 0) limits.push({ name: "sms_sender", key: `${prefix}:sms-sender:${sender}`, rate });
    }
    // The sender's first: a token it takes is lost when the account then holds the message
    // back (that sender runs a little slow while its account is the bottleneck), whereas an
    // account token lost to a throttled sender would slow every sender of the account.
    const accountRate = ACCOUNT_RATES[message.channel]?.(settings) ?? 0;
    if (accountRate > 0) {
      limits.push({
        name: "provider_account",
        key: `${prefix}:account:${message.channel}:${account}`,
        rate: accountRate,
      });
    }
    return limits;
  }

  type Refusal = Extract<Take, { granted: false }>;

  /**
   * Takes a token of one limit, waiting in process for each turn `mayWait` allows (holds in a row
   * so far, counted in `holding`); resolves with the refusal it did not wait for, if any.
   */
  async function takeOne(
    on: ThroughputLimiter,
    limit: ThroughputLimit,
    mode: LineMode,
    deadlineMs: () => number,
    turn: number,
    mayWait: (refusal: Refusal, holds: number) => boolean,
  ): Promise<Refusal | undefined> {
    for (let holds = 0; ; holds++) {
      const taken = await on.take(limit.key, { rate: limit.rate, mode, deadlineMs: deadlineMs(), turn });
      if (taken.granted) return undefined;
      if (!mayWait(taken, holds)) return taken;
      holding++;
      try {
        await sleep(taken.waitMs);
      } finally {
        holding--;
      }
      turn = taken.turn;
      mode = mode === "urgent" ? "urgent" : "returning";
    }
  }

  return {
    limitsOf,
    /**
     * Takes a token of every limit `message`'s attempt through `account` is under, or throws a
     * {@link ThroughputWait} saying how long to wait: until a little before the turn the limit
     * gave it, and never past the message's time to live, so the next run lets the domain end it
     * (`ttl_expired`) on time. A turn at most {@link MAX_HOLD_MS} away is waited for here.
     * `turn`: the turn a limit gave the message before (its job keeps it). Resolves with the
     * tokens taken (undefined: the attempt is under no limit).
     */
    async admit(
      message: MessageContent,
      account: string,
      options: { turn: ThroughputTurn | undefined; now: Date },
    ): Promise<Admission | undefined> {
      if (!limiter) return undefined;
      const limits = limitsOf(message, account);
      if (limits.length === 0) return undefined;
      const expiresAt = Date.parse(message.expiresAt);
      const startedAt = performance.now();
      // The message's clock moves on while it holds.
      const deadlineMs = () =>
        Math.max(0, expiresAt - options.now.getTime() - (performance.now() - startedAt));
      const labels = {
        channel: message.channel,
        senderKind: message.channel === "sms" ? smsSenderKind(message.sender) : "none",
        provider: account,
      };
      const tokens: Admission["tokens"] = [];
      for (const limit of limits) {
        const mine = options.turn?.key === limit.key ? options.turn.turn : 0;
        // A message that waited in any line comes back as `returning`: it may take a token
        // although newer messages queue, here too.
        const mode: LineMode =
          message.priority === "critical" ? "urgent" : options.turn ? "returning" : "new";
        let refused: Awaited<ReturnType<typeof takeOne>>;
        try {
          // A near turn is held for, a few times at most, while hold slots are free.
          refused = await takeOne(
            limiter,
            limit,
            mode,
            deadlineMs,
            mine,
            (taken, holds) =>
              holds < MAX_HOLDS &&
              taken.waitMs <= MAX_HOLD_MS &&
              taken.waitMs < deadlineMs() &&
              holding < deps.holdSlots,
          );
        } catch (error) {
          warnUnavailable(error, "throughput limiter unavailable: deliveries under a limit wait");
          throw new ThroughputWait(LIMITER_UNAVAILABLE_WAIT_MS, "unavailable", undefined, labels);
        }
        if (!refused) {
          tokens.push({ limit, grantedAt: performance.now() });
          continue;
        }
        // A far turn: back a little before it (the rest is held); a near one (no hold slot was
        // free): back at the turn. A few ms of jitter either way.
        const early = refused.waitMs > MAX_HOLD_MS ? EARLY_RETURN_MS : 0;
        const jitterMs = deps.random() * Math.min(10, 100 / limit.rate);
        const waitMs = Math.min(
          Math.max(0, Math.ceil(refused.waitMs - early + jitterMs)),
          Math.ceil(deadlineMs()),
        );
        const turn = refused.turn > 0 ? { key: limit.key, turn: refused.turn } : undefined;
        throw new ThroughputWait(waitMs, limit.name, turn, labels);
      }
      return { tokens, deadlineMs, labels };
    },

    /**
     * Called once the attempt's `pending` is recorded, just before the provider call: takes again
     * every token granted longer ago than {@link staleAfterMs}. Between the token and the call lies
     * that append, and a database that stalls for two seconds would otherwise release twenty sends
     * of a 10/s limit at once. A stale token is replaced by one of the urgent line (the attempt is
     * recorded: it can no longer be handed back), waited for in process. A wait ages the other
     * limit's token, so the tokens are looked at again until none is stale. The stale token is
     * lost: after a stall the limit runs below its rate. The send goes with the tokens it has when
     * the limiter does not answer, when the message's time to live or
     * {@link MAX_REFRESH_WAIT_MS} would pass first. Resolves with the limits whose tokens were
     * taken again.
     */
    async refresh(admission: Admission): Promise<ThroughputLimit[]> {
      const retaken: ThroughputLimit[] = [];
      if (!limiter) return retaken;
      const giveUpAt = performance.now() + MAX_REFRESH_WAIT_MS;
      const mayWait = (taken: Refusal) =>
        taken.waitMs < admission.deadlineMs() && performance.now() + taken.waitMs <= giveUpAt;
      const tokens = admission.tokens.map((token) => ({ ...token }));
      const stale = () => tokens.find((t) => performance.now() - t.grantedAt > staleAfterMs(t.limit));
      for (let token = stale(); token && performance.now() < giveUpAt; token = stale()) {
        try {
          const refused = await takeOne(limiter, token.limit, "urgent", admission.deadlineMs, 0, mayWait);
          if (refused) break;
        } catch (error) {
          warnUnavailable(error, "throughput limiter unavailable: a stale token is sent as granted");
          break;
        }
        token.grantedAt = performance.now();
        retaken.push(token.limit);
      }
      return retaken;
    },
  };
}

export type ThroughputLimits = ReturnType<typeof createThroughputLimits>;
