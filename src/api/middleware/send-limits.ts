import type { LimitState } from "./limit-headers.js";

/**
 * What the send limits offer to a handler that takes them per item (a batch's): the send rate's
 * token bucket and the daily quota, built once per process by `register-routes.ts` and shared
 * with the single sends' middleware.
 */

export interface SendLimits {
  /** Unset: no rate limit (`SEND_RATE_LIMIT=0`). */
  rate: TokenBucket | undefined;
  /** Unset: no quota (`SEND_DAILY_QUOTA=0`, or no Redis). */
  quota: DailyQuota | undefined;
}

/** A per-organization token bucket (src/api/middleware/rate-limit.ts `createTokenBucket`). */
export interface TokenBucket {
  /**
   * Takes up to `units` tokens of the organization's bucket (a batch's items), as many as it
   * holds: the calls of one organization that arrive in the same turn of the event loop take
   * theirs with one Redis round trip, the earliest first, as if they came one by one.
   */
  take(organizationId: string, units: number): Promise<Taken>;
  /** The bucket's size. */
  readonly burst: number;
  /** This limit as one item of `RateLimit-Policy`. */
  readonly policy: string;
  /** What a 429 says is limited. */
  describe(): string;
  /** Logged (at most every 10 s) when Redis is not ready, before a take. */
  warnIfRedisAway(): void;
}

/** One call's share of a bucket: how many of its tokens it got, what is left, and when. */
export interface Taken {
  granted: number;
  /** Tokens left once this call (and those before it) took theirs. */
  remaining: number;
  /** All granted: until the bucket is full again; some refused: until the next token. */
  msBeforeNext: number;
}

/**
 * A day's quota taken for a request: `granted` units of the `units` asked (`state` says where
 * the quota stands after them), or every unit uncounted while Redis is away (fail open, decision
 * 0032: the rate limit still holds per process).
 */
export type QuotaTaken =
  | { counted: true; granted: number; state: LimitState; resetsAt: Date; giveBack(units: number): void }
  | { counted: false; granted: number; giveBack(units: number): void };

/** A per-organization quota of messages per UTC day (src/api/middleware/daily-quota.ts `createDailyQuota`). */
export interface DailyQuota {
  readonly quota: number;
  /**
   * Takes up to `units` of the organization's quota for today (the sends of one organization
   * that arrive together take theirs with one call, the earliest first). Redis unavailable or
   * silent for 250 ms: every unit goes uncounted, and a take that may still run late is given
   * back by `giveBack`.
   */
  take(organizationId: string, units: number): Promise<QuotaTaken>;
}
