export interface RetryPolicy {
  /** Attempts in all, the first included. */
  maxAttempts: number;
  baseDelayMs: number;
  maxDelayMs: number;
}

/**
 * Delay before retry number `retryNumber` (1 for the first retry): exponential backoff with
 * "equal jitter" (half fixed, half random), so a burst of failures spreads out but a retry is
 * never much earlier than the schedule says. A provider's `Retry-After` is a floor.
 *
 * @param random a number in [0, 1); injected so the policy stays deterministic under test.
 */
export function retryDelayMs(
  policy: RetryPolicy,
  retryNumber: number,
  random: number,
  retryAfterMs?: number,
): number {
  const exponential = Math.min(policy.maxDelayMs, policy.baseDelayMs * 2 ** Math.max(0, retryNumber - 1));
  const jittered = Math.round(exponential / 2 + (random * exponential) / 2);
  return Math.max(jittered, retryAfterMs ?? 0);
}
