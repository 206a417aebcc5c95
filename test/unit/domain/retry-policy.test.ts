import { describe, expect, it } from "vitest";
import { type RetryPolicy, retryDelayMs } from "../../../src/domain/retry-policy.js";

const POLICY: RetryPolicy = { maxAttempts: 5, baseDelayMs: 1000, maxDelayMs: 60_000 };
/** The largest value below 1: `random` is documented as a number in [0, 1). */
const ALMOST_ONE = 1 - Number.EPSILON;

describe("retryDelayMs", () => {
  it("with the largest random, the first retry waits the base delay and each later retry twice as long", () => {
    const delays = [1, 2, 3, 4, 5, 6].map((retry) => retryDelayMs(POLICY, retry, ALMOST_ONE));
    expect(delays).toEqual([1000, 2000, 4000, 8000, 16_000, 32_000]);
  });

  it("with random 0, every retry waits exactly half of its exponential delay", () => {
    const delays = [1, 2, 3, 4].map((retry) => retryDelayMs(POLICY, retry, 0));
    expect(delays).toEqual([500, 1000, 2000, 4000]);
  });

  it("with random one half, the delay sits three quarters of the way up", () => {
    expect(retryDelayMs(POLICY, 1, 0.5)).toBe(750);
    expect(retryDelayMs(POLICY, 3, 0.5)).toBe(3000);
  });

  it("equal jitter keeps every delay between half and all of the exponential delay", () => {
    for (let retry = 1; retry <= 8; retry++) {
      const exponential = Math.min(POLICY.maxDelayMs, POLICY.baseDelayMs * 2 ** (retry - 1));
      for (let i = 0; i <= 100; i++) {
        const random = Math.min(i / 100, ALMOST_ONE);
        const delay = retryDelayMs(POLICY, retry, random);
        expect(delay).toBeGreaterThanOrEqual(exponential / 2);
        expect(delay).toBeLessThanOrEqual(exponential);
      }
    }
  });

  it("a larger random never gives a shorter delay for the same retry", () => {
    let previous = -1;
    for (let i = 0; i < 100; i++) {
      const delay = retryDelayMs(POLICY, 2, i / 100);
      expect(delay).toBeGreaterThanOrEqual(previous);
      previous = delay;
    }
  });

  it("a late retry is capped at maxDelayMs however many retries came before", () => {
    // 1000 * 2^6 = 64000 > 60000: the seventh retry is the first to hit the cap.
    expect(retryDelayMs(POLICY, 7, ALMOST_ONE)).toBe(60_000);
    expect(retryDelayMs(POLICY, 7, 0)).toBe(30_000);
    expect(retryDelayMs(POLICY, 50, ALMOST_ONE)).toBe(60_000);
    expect(retryDelayMs(POLICY, 5000, 0)).toBe(30_000);
  });

  it("a small maxDelayMs caps even the first retry", () => {
    const tight: RetryPolicy = { maxAttempts: 3, baseDelayMs: 1000, maxDelayMs: 400 };
    expect(retryDelayMs(tight, 1, 0)).toBe(200);
    expect(retryDelayMs(tight, 1, ALMOST_ONE)).toBe(400);
  });

  it("a Retry-After longer than the backoff is honoured exactly", () => {
    expect(retryDelayMs(POLICY, 1, ALMOST_ONE, 10_000)).toBe(10_000);
    expect(retryDelayMs(POLICY, 1, 0, 10_000)).toBe(10_000);
  });

  it("a Retry-After shorter than the backoff does not shorten it (it is a floor, not a target)", () => {
    expect(retryDelayMs(POLICY, 3, 0, 100)).toBe(2000);
    expect(retryDelayMs(POLICY, 3, ALMOST_ONE, 100)).toBe(4000);
  });

  it("a Retry-After beyond maxDelayMs still wins over the cap", () => {
    expect(retryDelayMs(POLICY, 1, 0, 120_000)).toBe(120_000);
  });

  it("a Retry-After of zero or none leaves the backoff alone", () => {
    expect(retryDelayMs(POLICY, 2, 0, 0)).toBe(1000);
    expect(retryDelayMs(POLICY, 2, 0, undefined)).toBe(1000);
  });

  it("is deterministic: the same inputs always give the same delay", () => {
    const first = retryDelayMs(POLICY, 4, 0.123, 50);
    for (let i = 0; i < 10; i++) expect(retryDelayMs(POLICY, 4, 0.123, 50)).toBe(first);
  });

  it("always returns a whole number of milliseconds", () => {
    const odd: RetryPolicy = { maxAttempts: 5, baseDelayMs: 333, maxDelayMs: 10_000 };
    for (let i = 0; i < 50; i++) expect(Number.isInteger(retryDelayMs(odd, 1 + (i % 5), i / 50))).toBe(true);
  });
});
