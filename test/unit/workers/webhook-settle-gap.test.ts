import { describe, expect, it } from "vitest";
import { settleGapMs } from "../../../workers/webhook-dispatcher.js";

describe("settleGapMs", () => {
  it("given only handed successes waiting, fewer than a batch, then settles wait the long gap", () => {
    expect(settleGapMs(1, true)).toBe(100);
    expect(settleGapMs(499, true)).toBe(100);
  });

  it("given anything that something waits on (a failure, a claimed delivery's success), then the short gap", () => {
    expect(settleGapMs(1, false)).toBe(20);
    expect(settleGapMs(499, false)).toBe(20);
  });

  it("given a full batch of handed successes waiting, then the short gap, so that settles keep up with any pace", () => {
    expect(settleGapMs(500, true)).toBe(20);
    expect(settleGapMs(5_000, true)).toBe(20);
  });
});
