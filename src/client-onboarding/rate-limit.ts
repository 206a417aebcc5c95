import type { MiddlewareHandler } from "hono";
import { RateLimiterMemory, RateLimiterRes } from "rate-limiter-flexible";
import { ApiError } from "../http/errors.js";
import type { ClientOnboardingContext, ClientOnboardingEnv } from "./types.js";

export interface RateLimitOptions {
  /** Requests allowed per client in one window. */
  limit: number;
  windowMs: number;
  clientKey: (c: ClientOnboardingContext) => string;
}

/**
 * Refuses a client past its limit with 429 and `Retry-After` (whole seconds, at least 1).
 * Counters live in this process's memory (rate-limiter-flexible), so N processes allow N × limit.
 */
export function rateLimitByClient(options: RateLimitOptions): MiddlewareHandler<ClientOnboardingEnv> {
  const limiter = new RateLimiterMemory({ points: options.limit, duration: options.windowMs / 1000 });
  return async function rateLimit(c, next) {
    try {
      await limiter.consume(options.clientKey(c));
    } catch (rejection) {
      if (!(rejection instanceof RateLimiterRes)) throw rejection;
      const seconds = Math.max(1, Math.ceil(rejection.msBeforeNext / 1000));
      throw new ApiError(429, `Too many requests; retry in ${seconds} s`, { "Retry-After": String(seconds) });
    }
    await next();
  };
}
