import type { Queue } from "bullmq";
import type { MiddlewareHandler } from "hono";
import type { Cluster, Redis } from "ioredis";
import {
  RateLimiterMemory,
  RateLimiterRedis,
  RateLimiterRes,
  RLWrapperTimeouts,
} from "rate-limiter-flexible";
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
  redisOfQueue,
  throttledWarning,
} from "./limit-support.js";
import type { Taken, TokenBucket } from "./send-limits.js";

export interface RateLimitDeps {
  config: Pick<
    Config,
    | "SEND_RATE_LIMIT"
    | "SEND_RATE_BURST"
    | "TEMPLATE_PREVIEW_RATE_LIMIT"
    | "TEMPLATE_PREVIEW_RATE_BURST"
    | "QUEUE_PREFIX"
  >;
  /** Where the BullMQ connection comes from when `redis` is not given. */
  queue?: Pick<Queue, "opts">;
  /** The shared bucket store; without one every process limits on its own. */
  redis?: Redis | Cluster;
  logger: Logger;
  /** Where a refused send's `Idempotency-Key` is looked up (a held one is let through to its replay). */
  store?: Pick<MessageStore, "holdsIdempotencyKey">;
  now?: () => Date;
}

/** One per-organization token bucket: what it limits, and how fast. */
export interface BucketOptions {
  /** Names the bucket's keys (`<QUEUE_PREFIX>:{limits}:rate-limit:<name>:<organization id>`) and its log lines. */
  name: string;
  /** Tokens a second (0: no limit). */
  rate: number;
  /** The bucket's size; unset: twice `rate`, and never below it. */
  burst: number | undefined;
  /** What the 429 says is limited, e.g. "this organization may send 100 messages a second (bursts of 200)". */
  describe: (rate: number, burst: number) => string;
  /** Lets a request over the limit through when it carries an `Idempotency-Key` already held (a replay). */
  admitReplays?: boolean;
}

/**
 * Token bucket, run by rate-limiter-flexible's RateLimiterRedis through its documented
 * `customIncrTtlLuaScript` hook, which passes ARGV = points to take, key TTL (s), the limiter's
 * `points` and `duration`. Here `points` is the bucket's capacity and `duration` the seconds it
 * takes to refill from empty, so the refill rate is points / duration. (ioredis registers the
 * script under one name per client, so every RateLimiterRedis sharing a client runs this same
 * text; any limiter on that client gets a token bucket of its own points and duration.)
 * The state is "tokens:last-refill-ms" in one key that expires once the bucket would be full.
 * It takes as many of the wanted tokens as the bucket holds (the sends of one organization that
 * arrive together ask at once). Returns `{consumed, msBeforeNext}`: `consumed <= capacity` means
 * every wanted token was taken; otherwise `consumed - capacity` of them were refused and
 * `msBeforeNext` is the wait until one token is back.
 */
export const TOKEN_BUCKET_SCRIPT = `
local want = tonumber(ARGV[1])
local capacity = tonumber(ARGV[3])
local rate = capacity / (tonumber(ARGV[4]) * 1000)
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local tokens = capacity
local saved = redis.call('GET', KEYS[1])
if saved then
  local sep = string.find(saved, ':', 1, true)
  if sep then
    local last = tonumber(string.sub(saved, sep + 1)) or now
    local before = tonumber(string.sub(saved, 1, sep - 1)) or capacity
    tokens = math.min(capacity, before + math.max(0, now - last) * rate)
  end
end
local granted = math.min(want, math.floor(tokens))
tokens = tokens - granted
local consumed
local wait
if granted == want then
  consumed = capacity - math.floor(tokens)
  wait = math.ceil((capacity - tokens) / rate)
else
  consumed = capacity + want - granted
  wait = math.ceil((1 - tokens) / rate)
end
local ttl = math.ceil((capacity - tokens) / rate) + 1000
redis.call('SET', KEYS[1], string.format('%.6f', tokens) .. ':' .. now, 'PX', ttl)
return {consumed, wait}
`;

/**
 * The per-organization bucket of sends (`SEND_RATE_LIMIT` a second, bursts of `SEND_RATE_BURST`),
 * all channels together, a batch's items one token each; dry runs count.
 */
export function sendBucket(deps: RateLimitDeps): TokenBucket | undefined {
  return createTokenBucket(deps, SEND_BUCKET(deps));
}

const SEND_BUCKET = (deps: RateLimitDeps): BucketOptions => ({
  name: "send",
  rate: deps.config.SEND_RATE_LIMIT,
  burst: deps.config.SEND_RATE_BURST,
  describe: (rate, burst) => `this organization may send ${rate} messages a second (bursts of ${burst})`,
  admitReplays: true,
});

/** The send bucket as middleware, one token a request. Must run after API-key authentication. */
export function sendRateLimit(deps: RateLimitDeps, bucket = sendBucket(deps)): MiddlewareHandler<AppEnv> {
  return bucketLimit(deps, bucket, SEND_BUCKET(deps));
}

/** Per-organization limit on template previews (`TEMPLATE_PREVIEW_RATE_LIMIT` a second). */
export function previewRateLimit(deps: RateLimitDeps): MiddlewareHandler<AppEnv> {
  return rateLimit(deps, {
    name: "preview",
    rate: deps.config.TEMPLATE_PREVIEW_RATE_LIMIT,
    burst: deps.config.TEMPLATE_PREVIEW_RATE_BURST,
    describe: (rate, burst) =>
      `this organization may preview ${rate} templates a second (bursts of ${burst})`,
  });
}

/** Domain checks a second per organization, and at once: each is a DNS look-up of up to ~4.5 s. */
export const SENDER_VERIFY_RATE = 1;
export const SENDER_VERIFY_BURST = 10;

/** Per-organization limit on `POST /api/v1/senders/domains/{id}/verify` (DNS look-ups), fixed. */
export function senderVerifyRateLimit(deps: RateLimitDeps): MiddlewareHandler<AppEnv> {
  return rateLimit(deps, {
    name: "sender-verify",
    rate: SENDER_VERIFY_RATE,
    burst: SENDER_VERIFY_BURST,
    describe: (rate, burst) =>
      `this organization may check ${rate} sending domain a second (bursts of ${burst})`,
  });
}

/** Test events a second per organization, and at once: each holds a request open for up to 5 s. */
export const WEBHOOK_TEST_RATE = 1;
export const WEBHOOK_TEST_BURST = 5;

/** Per-organization limit on `POST /api/v1/webhooks/endpoints/{id}/test` (outbound POSTs), fixed. */
export function webhookTestRateLimit(deps: RateLimitDeps): MiddlewareHandler<AppEnv> {
  return rateLimit(deps, {
    name: "webhook-test",
    rate: WEBHOOK_TEST_RATE,
    burst: WEBHOOK_TEST_BURST,
    describe: (rate, burst) =>
      `this organization may send ${rate} webhook test event a second (bursts of ${burst})`,
  });
}

/**
 * Recoveries per organization: one every 10 s, two at once. Each reads up to 9 days of the
 * organization's messages and queues up to 100,000 deliveries.
 */
export const WEBHOOK_RECOVER_RATE = 0.1;
export const WEBHOOK_RECOVER_BURST = 2;

/** Per-organization limit on `POST /api/v1/webhooks/endpoints/{id}/recover`, fixed. */
export function webhookRecoverRateLimit(deps: RateLimitDeps): MiddlewareHandler<AppEnv> {
  return rateLimit(deps, {
    name: "webhook-recover",
    rate: WEBHOOK_RECOVER_RATE,
    burst: WEBHOOK_RECOVER_BURST,
    describe: (rate, burst) =>
      `this organization may recover webhook events once every ${1 / rate} s (${burst} at once)`,
  });
}

/**
 * A per-organization token bucket in Redis (`burst` tokens, at least `rate`, refilled at `rate`
 * a second) shared by every web process. When Redis errors or does not answer within 250 ms, an
 * in-memory limiter of the same rate takes over in each process (the library's insurance
 * limiter), so the limit holds, per process, while Redis is away. Undefined for a rate of 0 (no
 * limit).
 */
export function createTokenBucket(deps: RateLimitDeps, options: BucketOptions): TokenBucket | undefined {
  const { rate } = options;
  if (rate === 0) return undefined;
  // The bucket holds at least one second's worth: the library needs a refill time of 1 s or more.
  const burst = Math.max(options.burst ?? 2 * rate, rate);
  const refillSeconds = burst / rate;
  const policy = `${burst};w=${Math.ceil(refillSeconds)}`;

  const keyPrefix = limitKeyPrefix(deps.config.QUEUE_PREFIX, `rate-limit:${options.name}`);
  // A fixed window close to the bucket: `burst` sends per refill time, in this process only.
  const insuranceLimiter = new RateLimiterMemory({ keyPrefix, points: burst, duration: refillSeconds });
  const redis = deps.redis ?? redisOfQueue(deps.queue);
  const limiter = redis
    ? new RLWrapperTimeouts({
        limiter: new RateLimiterRedis({
          storeClient: redis,
          keyPrefix,
          points: burst,
          duration: refillSeconds,
          customIncrTtlLuaScript: TOKEN_BUCKET_SCRIPT,
          rejectIfRedisNotReady: true,
        }),
        timeoutMs: REDIS_TIMEOUT_MS,
        insuranceLimiter,
      })
    : insuranceLimiter;

  const take = microBatch((wants: Want[]) => takeTogether(limiter, burst, refillSeconds, wants), {
    maxBatch: 10_000,
    // Turns waiting on Redis at once; what arrives beyond that joins the next, larger call.
    maxInFlight: 16,
    retryOneByOne: () => false,
  });
  const warn = throttledWarning(
    deps.logger,
    `rate limiter (${options.name}): Redis unavailable, limiting per process`,
  );
  return {
    take: (organizationId, units) => take({ organizationId, units }),
    burst,
    policy,
    describe: () => options.describe(rate, burst),
    warnIfRedisAway() {
      if (redis && redis.status !== "ready") warn();
    },
  };
}

/**
 * {@link createTokenBucket} as middleware, one token a request: every answer that passed it
 * carries the `RateLimit-*` fields (see limit-headers.ts); over the limit: 429 `{ error }` with
 * `Retry-After`, unless `admitReplays` and the request is the retry of an accepted send. Must run
 * after API-key authentication (the bucket is the organization's). A rate of 0 turns it off.
 */
export function rateLimit(deps: RateLimitDeps, options: BucketOptions): MiddlewareHandler<AppEnv> {
  return bucketLimit(deps, createTokenBucket(deps, options), options);
}

function bucketLimit(
  deps: RateLimitDeps,
  bucket: TokenBucket | undefined,
  options: Pick<BucketOptions, "admitReplays">,
): MiddlewareHandler<AppEnv> {
  if (!bucket) return async (_c, next) => next();
  const replayDeps = { store: deps.store, now: deps.now ?? (() => new Date()) };
  return async function rateLimitRequests(c, next) {
    bucket.warnIfRedisAway();
    const taken = await bucket.take(c.get("organization").id, 1);
    const state = bucketState(bucket, taken);
    if (taken.granted < 1) {
      // The retry of a send whose 202 was lost gets its replay, not a 429 (the handler answers it).
      if (options.admitReplays && (await isReplay(c, replayDeps))) return next();
      throw bucketRefusal(bucket, state);
    }
    await next();
    reportLimit(c, state);
  };
}

/** Where the bucket stands after a take, as the `RateLimit-*` fields say it. */
export function bucketState(bucket: TokenBucket, taken: Taken): LimitState {
  return {
    limit: bucket.burst,
    remaining: taken.remaining,
    resetSeconds: seconds(taken.msBeforeNext),
    policy: bucket.policy,
  };
}

/** The 429 of a take that got too few tokens: when to come back, in `Retry-After` and the fields. */
export function bucketRefusal(bucket: TokenBucket, state: LimitState): ApiError {
  const retryAfter = Math.max(1, state.resetSeconds);
  return new ApiError(429, `Too many requests: ${bucket.describe()}; retry in ${retryAfter} s`, {
    ...limitHeaders({ ...state, remaining: 0, resetSeconds: retryAfter }),
    "Retry-After": String(retryAfter),
  });
}

const seconds = (ms: number) => Math.max(0, Math.ceil(ms / 1000));

interface Want {
  organizationId: string;
  units: number;
}

/**
 * Takes each call's tokens, asking once per distinct organization for all of its calls' tokens.
 * Returns, per call in order, what it got, as if the calls had come one by one. Both limiters
 * report a refusal by `consumedPoints` past their capacity: that excess is how many of the wanted
 * tokens were refused, and the refused ones are the latest.
 */
async function takeTogether(
  limiter: Pick<RateLimiterMemory, "consume">,
  capacity: number,
  refillSeconds: number,
  wants: Want[],
): Promise<Taken[]> {
  const positions = positionsByKey(wants.map((want) => want.organizationId));
  const results = new Array<Taken>(wants.length);
  await Promise.all(
    Array.from(positions, async ([id, indexes]) => {
      const units = indexes.map((index) => (wants[index] as Want).units);
      const total = units.reduce((sum, n) => sum + n, 0);
      try {
        const res = await limiter.consume(id, total);
        // Each call sees what is left after it and those before it.
        let later = total;
        indexes.forEach((index, i) => {
          later -= units[i] as number;
          results[index] = {
            granted: units[i] as number,
            remaining: res.remainingPoints + later,
            msBeforeNext: res.msBeforeNext,
          };
        });
      } catch (rejection) {
        if (!(rejection instanceof RateLimiterRes)) throw rejection;
        const excess = rejection.consumedPoints - capacity;
        let left = total - (excess > 0 ? Math.min(total, excess) : total);
        indexes.forEach((index, i) => {
          const granted = Math.min(units[i] as number, left);
          left -= granted;
          results[index] =
            granted === units[i]
              ? // These emptied the bucket: it is whole again a full refill time later.
                { granted, remaining: left, msBeforeNext: refillSeconds * 1000 }
              : { granted, remaining: 0, msBeforeNext: rejection.msBeforeNext };
        });
      }
    }),
  );
  return results;
}
