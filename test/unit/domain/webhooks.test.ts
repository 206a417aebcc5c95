import { describe, expect, it } from "vitest";
import {
  isWebhookSuccess,
  nextWebhookAttempt,
  recoverSinceProblem,
  retryAfterMs,
  WEBHOOK_MAX_RETRY_AFTER_MS,
  WEBHOOK_RECOVER_MESSAGE_LOOKBACK_MS,
  WEBHOOK_RETRY_DELAYS_MS,
  WEBHOOK_RETRY_JITTER,
  webhookUrlProblem,
} from "../../../src/domain/webhooks.js";

const problem = (url: string, allowed: string[] = []) => webhookUrlProblem(new URL(url), allowed);

describe("webhookUrlProblem", () => {
  it("takes https:// anywhere", () => {
    expect(problem("https://hooks.example.com/in?x=1")).toBeUndefined();
    expect(problem("https://hooks.example.com:8443/")).toBeUndefined();
  });

  it("takes http:// only to a host WEBHOOK_ALLOWED_HOSTS names (name, host:port or *.suffix)", () => {
    expect(problem("http://hooks.example.com/")).toMatch(/WEBHOOK_ALLOWED_HOSTS/);
    expect(problem("http://hooks.internal/", ["hooks.internal"])).toBeUndefined();
    expect(problem("http://hooks.internal:8080/", ["hooks.internal:8080"])).toBeUndefined();
    expect(problem("http://hooks.internal:9090/", ["hooks.internal:8080"])).toMatch(/https/);
    expect(problem("http://a.svc.local/", ["*.svc.local"])).toBeUndefined();
    expect(problem("http://svc.local.evil.com/", ["*.svc.local"])).toMatch(/https/);
  });

  it("refuses other schemes, credentials and fragments", () => {
    expect(problem("ftp://hooks.example.com/")).toMatch(/https/);
    expect(problem("https://u:p@hooks.example.com/")).toMatch(/password/);
    expect(problem("https://hooks.example.com/#x")).toMatch(/fragment/);
  });
});

describe("recoverSinceProblem", () => {
  const now = new Date("2026-11-25T12:00:00Z");
  const ago = (ms: number) => new Date(now.getTime() - ms);
  const DAY = 24 * 3_600_000;

  it("takes any instant from 7 days ago to now", () => {
    expect(recoverSinceProblem(now, now)).toBeUndefined();
    expect(recoverSinceProblem(ago(DAY), now)).toBeUndefined();
    expect(recoverSinceProblem(ago(7 * DAY), now)).toBeUndefined();
  });

  it("refuses the future and more than 7 days ago", () => {
    expect(recoverSinceProblem(ago(-1), now)).toMatch(/future/);
    expect(recoverSinceProblem(ago(7 * DAY + 1), now)).toMatch(/7 days/);
  });

  it("looks at messages accepted up to the longest time-to-live (a day) and a day more before `since`", () => {
    expect(WEBHOOK_RECOVER_MESSAGE_LOOKBACK_MS).toBe(2 * DAY);
  });
});

describe("nextWebhookAttempt", () => {
  const now = new Date("2026-11-25T12:00:00.000Z");
  const middle = () => 0.5; // no jitter
  const at = (ms: number) => new Date(now.getTime() + ms);
  const failure = (statusCode: number | null, retryAfter?: string) => ({ statusCode, retryAfter });

  it("given any 2xx, then the delivery is done, whatever attempt it was", () => {
    for (const status of [200, 201, 202, 204, 299]) {
      expect(nextWebhookAttempt(1, { statusCode: status }, middle, now)).toEqual({ step: "delivered" });
      expect(nextWebhookAttempt(8, { statusCode: status }, middle, now)).toEqual({ step: "delivered" });
    }
  });

  it("given a 410 Gone, then the endpoint is disabled, even with retries left", () => {
    expect(nextWebhookAttempt(1, failure(410), middle, now)).toEqual({ step: "disable_endpoint" });
    expect(nextWebhookAttempt(8, failure(410), middle, now)).toEqual({ step: "disable_endpoint" });
  });

  it("given failures, then they are retried on the issue's schedule and given up after the eighth attempt", () => {
    const delays = [5_000, 300_000, 1_800_000, 7_200_000, 18_000_000, 36_000_000, 36_000_000];
    expect(WEBHOOK_RETRY_DELAYS_MS).toEqual(delays);
    delays.forEach((delay, index) => {
      expect(nextWebhookAttempt(index + 1, failure(500), middle, now)).toEqual({
        step: "retry",
        at: at(delay),
      });
    });
    expect(nextWebhookAttempt(8, failure(500), middle, now)).toEqual({ step: "give_up" });
    expect(nextWebhookAttempt(9, failure(500), middle, now)).toEqual({ step: "give_up" });
  });

  it("given a 3xx, a time-out, a connection error or another 4xx, then each is a failure retried like a 500", () => {
    for (const status of [301, 302, 304, 400, 401, 404, 408, 413, 500, 502, 504, null]) {
      expect(nextWebhookAttempt(1, failure(status), middle, now)).toEqual({ step: "retry", at: at(5_000) });
    }
  });

  it("given random at its ends, then the delay varies by at most ±20 %", () => {
    expect(nextWebhookAttempt(2, failure(500), () => 0, now)).toEqual({ step: "retry", at: at(240_000) });
    expect(nextWebhookAttempt(2, failure(500), () => 0.999_999, now)).toEqual({
      step: "retry",
      at: at(Math.round(300_000 * (1 + 0.2 * (2 * 0.999_999 - 1)))),
    });
    expect(WEBHOOK_RETRY_JITTER).toBe(0.2);
  });

  it("given a 429 or 503 with Retry-After in seconds longer than the schedule, then it waits that long", () => {
    expect(nextWebhookAttempt(1, failure(429, "120"), middle, now)).toEqual({
      step: "retry",
      at: at(120_000),
    });
    expect(nextWebhookAttempt(1, failure(503, " 60 "), middle, now)).toEqual({
      step: "retry",
      at: at(60_000),
    });
  });

  it("given a Retry-After shorter than the schedule, then the schedule wins", () => {
    expect(nextWebhookAttempt(2, failure(429, "1"), middle, now)).toEqual({ step: "retry", at: at(300_000) });
    expect(nextWebhookAttempt(1, failure(503, "0"), middle, now)).toEqual({ step: "retry", at: at(5_000) });
  });

  it("given a Retry-After as an HTTP date, then it waits until then (a past date: the schedule)", () => {
    const inTenMinutes = new Date(now.getTime() + 600_000).toUTCString();
    expect(nextWebhookAttempt(1, failure(503, inTenMinutes), middle, now)).toEqual({
      step: "retry",
      at: at(600_000),
    });
    const past = new Date(now.getTime() - 600_000).toUTCString();
    expect(nextWebhookAttempt(1, failure(503, past), middle, now)).toEqual({ step: "retry", at: at(5_000) });
  });

  it("given a Retry-After beyond 10 h, then it waits 10 h", () => {
    expect(nextWebhookAttempt(1, failure(429, String(3 * 86_400)), middle, now)).toEqual({
      step: "retry",
      at: at(WEBHOOK_MAX_RETRY_AFTER_MS),
    });
    expect(WEBHOOK_MAX_RETRY_AFTER_MS).toBe(36_000_000);
  });

  it("given Retry-After on another status, or unreadable, then it is ignored", () => {
    expect(nextWebhookAttempt(1, failure(500, "120"), middle, now)).toEqual({ step: "retry", at: at(5_000) });
    expect(nextWebhookAttempt(1, failure(302, "120"), middle, now)).toEqual({ step: "retry", at: at(5_000) });
    for (const header of ["soon", "-5", "1.5", "2026-11-25T13:00:00Z", "", "Wed, 99 Foo 2026 00:00:00 GMT"]) {
      expect(nextWebhookAttempt(1, failure(429, header), middle, now)).toEqual({
        step: "retry",
        at: at(5_000),
      });
    }
  });

  it("given the last attempt and a Retry-After, then it is given up all the same", () => {
    expect(nextWebhookAttempt(8, failure(429, "60"), middle, now)).toEqual({ step: "give_up" });
  });

  it("given a schedule of its own (tests), then that schedule is followed", () => {
    expect(nextWebhookAttempt(1, failure(500), middle, now, [10, 20])).toEqual({ step: "retry", at: at(10) });
    expect(nextWebhookAttempt(2, failure(500), middle, now, [10, 20])).toEqual({ step: "retry", at: at(20) });
    expect(nextWebhookAttempt(3, failure(500), middle, now, [10, 20])).toEqual({ step: "give_up" });
  });
});

describe("retryAfterMs", () => {
  const now = new Date("2026-11-25T12:00:00.000Z");
  it("reads delay-seconds and HTTP dates, and nothing else", () => {
    expect(retryAfterMs("30", now)).toBe(30_000);
    expect(retryAfterMs("Wed, 25 Nov 2026 12:01:00 GMT", now)).toBe(60_000);
    expect(retryAfterMs("Wed, 25 Nov 2026 11:00:00 GMT", now)).toBe(0);
    expect(retryAfterMs(undefined, now)).toBeUndefined();
    expect(retryAfterMs(null, now)).toBeUndefined();
    expect(retryAfterMs("30s", now)).toBeUndefined();
    expect(retryAfterMs("Wed, 25 Nov 2026 12:01:00 +0100", now)).toBeUndefined();
  });
});

describe("isWebhookSuccess", () => {
  it("is true for 2xx only", () => {
    expect([199, 200, 204, 299, 300, 302, 404, 500, null].map(isWebhookSuccess)).toEqual([
      false,
      true,
      true,
      true,
      false,
      false,
      false,
      false,
      false,
    ]);
  });
});
