import { describe, expect, it } from "vitest";
import {
  recoverSinceProblem,
  WEBHOOK_RECOVER_MESSAGE_LOOKBACK_MS,
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
