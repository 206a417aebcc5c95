import type { Queue } from "bullmq";
import type { Context, MiddlewareHandler } from "hono";
import type { Cluster, Redis } from "ioredis";
import { ApiError } from "../../http/errors.js";
import type { Config } from "../../runtime/config.js";
import type { Logger } from "../../runtime/logger.js";
import type { MessageStore } from "../../store/message-store.js";
import { microBatch } from "../../store/micro-batch.js";
import type { AppEnv } from "../types.js";
import { type LimitState, limitHeaders, reportLimit } from "./limit-headers.js";
import {
  isReplay,
  limitKeyPrefix,
  positionsByKey,
  REDIS_TIMEOUT_MS,
  RedisTimeoutError,
  redisOfQueue,
  throttledWarning,
  withTimeout,
} from "./limit-support.js";
import type { DailyQuota, QuotaTaken } from "./send-limits.js";

/**
 * After Redis failed or stayed silent, sends go uncounted this long before it is asked again, so
 * a hung Redis costs one send in a while its 250 ms, not every send.
 */
const RETRY_REDIS_AFTER_MS = 1000;
const DAY_MS = 86_400_000;
/** A day's counter outlives its day by this much, so a process whose clock is a little behind still finds it. */
const KEY_GRACE_MS = 3_600_000;

/**
 * Takes up to ARGV[1] units of a day's quota (ARGV[2]) from the counter KEYS[1], never counting
 * past the quota; a counter it creates starts at ARGV[4] (the day's count carried from the
 * counter's name before the `{limits}` tag, 0 when none) and expires ARGV[3] ms later (the day's
 * end, plus a grace). Returns `{granted, used}`: how many were taken, and the count after them.
 * One key per call, so it runs on a Redis Cluster as it is.
 */
export const QUOTA_TAKE_SCRIPT = `
local want = tonumber(ARGV[1])
local quota = tonumber(ARGV[2])
local saved = redis.call('GET', KEYS[1])
local used = tonumber(saved or ARGV[4])
local granted = math.min(want, math.max(0, quota - used))
if saved then
  if granted > 0 then used = redis.call('INCRBY', KEYS[1], granted) end
elseif used + granted > 0 then
  used = used + granted
  redis.call('SET', KEYS[1], used, 'PX', ARGV[3])
end
return {granted, used}
`;

/** Gives back ARGV[1] units of a counter that still exists (never creates one without an expiry). */
export const QUOTA_GIVE_BACK_SCRIPT = `
local used = tonumber(redis.call('GET', KEYS[1]) or '0')
if used <= 0 then return 0 end
return redis.call('DECRBY', KEYS[1], math.min(used, tonumber(ARGV[1])))
`;

interface QuotaCommands {
  sendQuotaTake(
    key: string,
    want: number,
    quota: number,
    ttlMs: number,
    carried: number,
  ): Promise<[number, number]>;
  sendQuotaGiveBack(key: string, units: number): Promise<number>;
}

export interface DailyQuotaDeps {
  config: Pick<Config, "SEND_DAILY_QUOTA" | "QUEUE_PREFIX">;
  /** Where the BullMQ connection comes from when `redis` is not given. */
  queue?: Pick<Queue, "opts">;
  /** The counters' store, shared by every web process; without one there is no quota. */
  redis?: Redis | Cluster;
  logger: Logger;
  /** The clock that says which UTC day it is. */
  now: () => Date;
  /** Where a refused send's `Idempotency-Key` is looked up (a held one is let through to its replay). */
  store?: Pick<MessageStore, "holdsIdempotencyKey">;
}

/** The UTC day of `at` (`2026-11-24`), and the milliseconds from `at` to its end. */
export function utcDay(at: Date): { day: string; msLeft: number } {
  const ms = at.getTime();
  const start = ms - (((ms % DAY_MS) + DAY_MS) % DAY_MS);
  return { day: new Date(start).toISOString().slice(0, 10), msLeft: start + DAY_MS - ms };
}

/**
 * Per-organization quota of messages per UTC day (`SEND_DAILY_QUOTA`), one counter per
 * organization and day in Redis (`<QUEUE_PREFIX>:{limits}:quota:send:<organization id>:<day>`), shared by
 * every web process. Undefined when there is no quota (0) or no Redis.
 */
export function createDailyQuota(deps: DailyQuotaDeps): DailyQuota | undefined {
  const quota = deps.config.SEND_DAILY_QUOTA;
  const redis = (deps.redis ?? redisOfQueue(deps.queue)) as
    | ((Redis | Cluster) & Partial<QuotaCommands>)
    | undefined;
  if (quota === 0 || !redis) return undefined;
  redis.defineCommand("sendQuotaTake", { numberOfKeys: 1, lua: QUOTA_TAKE_SCRIPT });
  redis.defineCommand("sendQuotaGiveBack", { numberOfKeys: 1, lua: QUOTA_GIVE_BACK_SCRIPT });
  const commands = redis as (Redis | Cluster) & QuotaCommands;
  const keyPrefix = limitKeyPrefix(deps.config.QUEUE_PREFIX, "quota:send");
  const policy = `${quota};w=86400`;

  let redisFailedAt = Number.NEGATIVE_INFINITY;
  const warn = throttledWarning(deps.logger, "daily quota: Redis unavailable, sends are not counted");

  // An upgrade in the middle of a day keeps the day's count: the counter's name before the
  // `{limits}` tag (decision 0041) is read by each process for an organization's first take of
  // a day, and its count is where a counter the take creates starts. (Remove once every
  // deployment has run a release with the tag for a whole day.)
  const legacyPrefix = `${deps.config.QUEUE_PREFIX}:quota:send`;
  const carried = new Set<string>();
  let carriedDay = "";
  /** The old counter's count, or 0 once this process's take of the key has run with it. */
  const carriedCount = async (orgDay: string, day: string): Promise<number> => {
    if (day !== carriedDay) {
      carried.clear();
      carriedDay = day;
    }
    if (carried.has(orgDay)) return 0;
    try {
      return Number((await withTimeout(redis.get(`${legacyPrefix}:${orgDay}`), REDIS_TIMEOUT_MS)) ?? 0);
    } catch (error) {
      // Not a RedisTimeoutError: the take was never sent, so there is nothing to give back.
      throw new Error("daily quota: the day's count under the counter's old name could not be read", {
        cause: error,
      });
    }
  };

  // The sends of one organization that arrive together take their units with one call.
  const take = microBatch(
    async (
      wants: Array<{ organizationId: string; day: string; ttlMs: number; units: number }>,
    ): Promise<Array<{ granted: number; used: number }>> => {
      const results = new Array<{ granted: number; used: number }>(wants.length);
      const keys = wants.map(({ organizationId, day }) => `${organizationId}:${day}`);
      await Promise.all(
        Array.from(positionsByKey(keys), async ([orgDay, indexes]) => {
          // The same key is the same day: any of its requests' day and expiry will do.
          const { day, ttlMs } = wants[indexes[0] as number] as { day: string; ttlMs: number };
          const units = indexes.map((index) => (wants[index] as { units: number }).units);
          const total = units.reduce((sum, n) => sum + n, 0);
          const before = await carriedCount(orgDay, day);
          const [granted, used] = await withTimeout(
            commands.sendQuotaTake(`${keyPrefix}:${orgDay}`, total, quota, ttlMs, before),
            REDIS_TIMEOUT_MS,
          );
          carried.add(orgDay);
          // The earliest get the units; each sees the count as if they had come one by one.
          let count = used - granted;
          let left = granted;
          indexes.forEach((index, i) => {
            const mine = Math.min(units[i] as number, left);
            left -= mine;
            count += mine;
            results[index] = { granted: mine, used: count };
          });
        }),
      );
      return results;
    },
    { maxBatch: 10_000, maxInFlight: 16, retryOneByOne: () => false },
  );

  const uncounted = (units: number, key: string, lateTake: boolean): QuotaTaken => ({
    counted: false,
    granted: units,
    // A take given up on may still run: Redis runs the give-back after it, on the same connection.
    giveBack: (back) => {
      if (lateTake && back > 0) commands.sendQuotaGiveBack(key, back).catch(warn);
    },
  });

  return {
    quota,
    async take(organizationId, units) {
      const now = deps.now();
      const { day, msLeft } = utcDay(now);
      const key = `${keyPrefix}:${organizationId}:${day}`;
      // Fail open: not connected (rather than wait in a client's offline queue), or failed just now.
      if (redis.status !== "ready") {
        warn(new Error(`Redis connection ${redis.status}`));
        return uncounted(units, key, false);
      }
      if (performance.now() - redisFailedAt < RETRY_REDIS_AFTER_MS) return uncounted(units, key, false);
      let granted: number;
      let used: number;
      try {
        ({ granted, used } = await take({ organizationId, day, ttlMs: msLeft + KEY_GRACE_MS, units }));
      } catch (error) {
        redisFailedAt = performance.now();
        warn(error);
        return uncounted(units, key, error instanceof RedisTimeoutError);
      }
      const state: LimitState = {
        limit: quota,
        remaining: quota - used,
        resetSeconds: Math.ceil(msLeft / 1000),
        policy,
      };
      return {
        counted: true,
        granted,
        state,
        resetsAt: new Date(now.getTime() + msLeft),
        giveBack(back) {
          if (back <= 0) return;
          state.remaining += back;
          commands.sendQuotaGiveBack(key, back).catch(warn);
        },
      };
    },
  };
}

/** The 429 of a take past the quota: until the next UTC midnight. */
export function quotaRefusal(quota: number, taken: Extract<QuotaTaken, { counted: true }>): ApiError {
  const retryAfter = Math.max(1, taken.state.resetSeconds);
  return new ApiError(
    429,
    `Daily quota reached: this organization may send ${quota} messages per UTC day; ` +
      `it resets at ${taken.resetsAt.toISOString()} (retry in ${retryAfter} s)`,
    {
      ...limitHeaders({ ...taken.state, remaining: 0, resetSeconds: retryAfter }),
      "Retry-After": String(retryAfter),
    },
  );
}

/**
 * {@link createDailyQuota} as middleware, one unit a send: taken before it is handled, and given
 * back unless its handler accepted a message (see {@link markMessageAccepted}; an accept that
 * outlives the request's deadline still counts): dry runs, replays of an `Idempotency-Key`, and
 * refused or failed requests cost nothing. Over the quota: 429 `{ error }` with `Retry-After`
 * until the next UTC midnight, except for the retry of an accepted send (an `Idempotency-Key`
 * held), which gets its replay. Runs after the rate limit. A quota of 0 turns it off.
 */
export function sendDailyQuota(
  deps: DailyQuotaDeps,
  daily = createDailyQuota(deps),
): MiddlewareHandler<AppEnv> {
  if (!daily) return async (_c, next) => next();
  return async function dailyQuota(c, next) {
    const taken = await daily.take(c.get("organization").id, 1);
    if (!taken.counted) {
      try {
        await next();
      } finally {
        if (!c.get("messageAccepted")) taken.giveBack(1);
      }
      return;
    }
    if (taken.granted < 1) {
      // The retry of a send whose 202 was lost gets its replay, not a 429 until midnight.
      if (await isReplay(c, deps)) return next();
      throw quotaRefusal(daily.quota, taken);
    }
    try {
      await next();
    } finally {
      if (!c.get("messageAccepted")) taken.giveBack(1);
    }
    reportLimit(c, taken.state);
  };
}

/**
 * Tells the daily quota that this request's handler accepted a new message (not a replay, not a
 * dry run), whatever the response ends up being: an accept that outlives the request's deadline
 * answered by a 503 still took its unit.
 */
export function markMessageAccepted(c: Context<AppEnv>): void {
  c.set("messageAccepted", true);
}
