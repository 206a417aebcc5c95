import { describe, expect, it } from "vitest";
import {
  NOTIFICATION_TYPES,
  type NotificationType,
  PRIORITY_TIERS,
  type PriorityTier,
  QUEUE_PRIORITY,
  TIME_TO_LIVE_MS,
  tierOf,
} from "../../../src/domain/priority.js";

const MINUTE = 60_000;
const HOUR = 60 * MINUTE;

function typesIn(tier: PriorityTier): NotificationType[] {
  return NOTIFICATION_TYPES.filter((type) => tierOf(type) === tier);
}

describe("notification types", () => {
  it("the spec's closed list has 71 distinct types", () => {
    expect(NOTIFICATION_TYPES).toHaveLength(71);
    expect(new Set(NOTIFICATION_TYPES).size).toBe(71);
  });

  it("every type has exactly one of the four tiers", () => {
    for (const type of NOTIFICATION_TYPES) expect(PRIORITY_TIERS).toContain(tierOf(type));
    const counts = PRIORITY_TIERS.map((tier) => typesIn(tier).length);
    expect(counts).toEqual([15, 8, 24, 24]);
  });

  it("the first 15 types are critical, from OTP to ACCOUNT_COMPROMISE_WARNING", () => {
    const critical = typesIn("critical");
    expect(critical).toEqual(NOTIFICATION_TYPES.slice(0, 15));
    expect(critical[0]).toBe("OTP");
    expect(critical.at(-1)).toBe("ACCOUNT_COMPROMISE_WARNING");
    expect(tierOf("OTP")).toBe("critical");
    expect(tierOf("ACCOUNT_COMPROMISE_WARNING")).toBe("critical");
    expect(tierOf("FRAUD_ALERT")).toBe("critical");
  });

  it("the next 8 are high, from DEPENDENCY_FAILURE to HIGH_PRIORITY_SYSTEM_ALERT_FOR_ADMINS", () => {
    const high = typesIn("high");
    expect(high).toEqual(NOTIFICATION_TYPES.slice(15, 23));
    expect(high[0]).toBe("DEPENDENCY_FAILURE");
    expect(high.at(-1)).toBe("HIGH_PRIORITY_SYSTEM_ALERT_FOR_ADMINS");
  });

  it("the next 24 are medium, from SUBSCRIPTION_RENEWAL_REMINDER to ACCOUNT_VERIFICATION_EMAIL", () => {
    const medium = typesIn("medium");
    expect(medium).toEqual(NOTIFICATION_TYPES.slice(23, 47));
    expect(medium[0]).toBe("SUBSCRIPTION_RENEWAL_REMINDER");
    expect(medium.at(-1)).toBe("ACCOUNT_VERIFICATION_EMAIL");
  });

  it("the last 24 are low, from NEWS_UPDATE to JOB_SUGGESTIONS", () => {
    const low = typesIn("low");
    expect(low).toEqual(NOTIFICATION_TYPES.slice(47));
    expect(low[0]).toBe("NEWS_UPDATE");
    expect(low.at(-1)).toBe("JOB_SUGGESTIONS");
  });

  it("the tier boundaries fall exactly between neighbouring types", () => {
    expect([tierOf("ACCOUNT_COMPROMISE_WARNING"), tierOf("DEPENDENCY_FAILURE")]).toEqual([
      "critical",
      "high",
    ]);
    expect([
      tierOf("HIGH_PRIORITY_SYSTEM_ALERT_FOR_ADMINS"),
      tierOf("SUBSCRIPTION_RENEWAL_REMINDER"),
    ]).toEqual(["high", "medium"]);
    expect([tierOf("ACCOUNT_VERIFICATION_EMAIL"), tierOf("NEWS_UPDATE")]).toEqual(["medium", "low"]);
  });

  it("a request with no notification type is medium", () => {
    expect(tierOf(undefined)).toBe("medium");
  });

  it("a type outside the list is refused rather than given a tier", () => {
    expect(() => tierOf("NOT_A_TYPE" as NotificationType)).toThrow(/NOT_A_TYPE/);
  });
});

describe("time to live per tier", () => {
  it("critical lives 10 minutes, high 1 hour, medium and low 24 hours", () => {
    expect(TIME_TO_LIVE_MS).toEqual({ critical: 10 * MINUTE, high: HOUR, medium: 24 * HOUR, low: 24 * HOUR });
  });

  it("an OTP expires long before a newsletter", () => {
    expect(TIME_TO_LIVE_MS[tierOf("OTP")]).toBeLessThan(TIME_TO_LIVE_MS[tierOf("NEWS_UPDATE")]);
  });
});

describe("queue priority", () => {
  it("critical is taken first, then high, medium and low (BullMQ takes the lowest number first)", () => {
    const order = [...PRIORITY_TIERS].sort((a, b) => QUEUE_PRIORITY[a] - QUEUE_PRIORITY[b]);
    expect(order).toEqual(["critical", "high", "medium", "low"]);
    expect(QUEUE_PRIORITY.critical).toBe(1);
  });

  it("no two tiers share a queue priority, and all are valid BullMQ priorities", () => {
    const values = PRIORITY_TIERS.map((tier) => QUEUE_PRIORITY[tier]);
    expect(new Set(values).size).toBe(4);
    for (const value of values) {
      expect(Number.isInteger(value)).toBe(true);
      expect(value).toBeGreaterThanOrEqual(1);
      expect(value).toBeLessThanOrEqual(2_097_152);
    }
  });

  it("an OTP is queued ahead of every low-priority type", () => {
    for (const type of typesIn("low")) {
      expect(QUEUE_PRIORITY[tierOf("OTP")]).toBeLessThan(QUEUE_PRIORITY[tierOf(type)]);
    }
  });
});
