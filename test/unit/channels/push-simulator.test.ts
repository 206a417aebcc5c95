import { describe, expect, it } from "vitest";
import type { PushMessage } from "../../../src/channels/push/providers/provider.js";
import {
  SIMULATOR_PUSH_ENDPOINTS,
  SIMULATOR_PUSH_ORIGIN,
  type SimulatorPushOutcome,
  SimulatorPushProvider,
  simulatorPushEndpoint,
} from "../../../src/channels/push/providers/simulator.js";
import { attemptOutcomes, simulatedFailure } from "../../support/simulator-outcomes.js";

function message(endpoint: string, attempt: number, messageId = "msg-1"): PushMessage {
  return {
    messageId,
    subscription: { endpoint, keys: { p256dh: "not-checked", auth: "not-checked" } },
    payload: JSON.stringify({ title: "Hello", body: "World" }),
    ttlSeconds: 60,
    urgency: "normal",
    attempt,
  };
}

function outcomes(provider: SimulatorPushProvider, endpoint: string, attempts: number) {
  return attemptOutcomes((attempt) => provider.send(message(endpoint, attempt)), attempts);
}

const failure = simulatedFailure;
const success = {
  ok: true,
  provider: "simulator",
  providerMessageId: expect.stringMatching(
    /^https:\/\/push\.simulator\.notify\.test\/messages\/[0-9a-f]{32}$/,
  ),
};

describe("SimulatorPushProvider", () => {
  const provider = new SimulatorPushProvider();

  it("is named simulator", () => {
    expect(provider.name).toBe("simulator");
  });

  it("an ordinary endpoint succeeds on the first attempt", async () => {
    expect(await provider.send(message("https://fcm.googleapis.com/fcm/send/abc123", 1))).toEqual(success);
  });

  it("a simulator endpoint that names no outcome succeeds", async () => {
    expect(await provider.send(message(`${SIMULATOR_PUSH_ORIGIN}/anything-else/gone`, 1))).toEqual(success);
    expect(await provider.send(message(`${SIMULATOR_PUSH_ORIGIN}/`, 1))).toEqual(success);
    expect(await provider.send(message(`${SIMULATOR_PUSH_ORIGIN}/constructor`, 1))).toEqual(success);
  });

  it("an outcome's name on another host is an ordinary endpoint", async () => {
    expect(await provider.send(message("https://push.example/gone", 1))).toEqual(success);
    expect(await provider.send(message("http://push.simulator.notify.test/gone", 1))).toEqual(success);
  });

  it("an endpoint that is not a URL still yields an outcome", async () => {
    expect(await provider.send(message("not a url", 1))).toEqual(success);
  });

  it("the message id is stable for a message and attempt, and differs between them", async () => {
    const id = async (messageId: string, attempt: number) => {
      const outcome = await provider.send(message("https://push.example/x", attempt, messageId));
      if (!outcome.ok) throw new Error("expected success");
      return outcome.providerMessageId;
    };
    expect(await id("a", 1)).toBe(await id("a", 1));
    expect(await id("a", 1)).not.toBe(await id("a", 2));
    expect(await id("a", 1)).not.toBe(await id("b", 1));
  });

  it("/gone is rejected as subscription_gone on every attempt, whatever follows it", async () => {
    expect(await outcomes(provider, `${SIMULATOR_PUSH_ORIGIN}/gone/user-42?x=1`, 3)).toEqual([
      failure("rejected", "subscription_gone"),
      failure("rejected", "subscription_gone"),
      failure("rejected", "subscription_gone"),
    ]);
  });

  it("/transient fails transiently on every attempt", async () => {
    const results = await outcomes(provider, simulatorPushEndpoint("transient"), 10);
    expect(results).toEqual(Array.from({ length: 10 }, () => failure("transient", "simulated_outage")));
  });

  it("/transient-once fails transiently once, then succeeds", async () => {
    expect(await outcomes(provider, simulatorPushEndpoint("transient-once", "a"), 3)).toEqual([
      failure("transient", "simulated_outage"),
      success,
      success,
    ]);
  });

  it("/transient-twice fails transiently twice, then succeeds", async () => {
    expect(await outcomes(provider, simulatorPushEndpoint("transient-twice"), 4)).toEqual([
      failure("transient", "simulated_outage"),
      failure("transient", "simulated_outage"),
      success,
      success,
    ]);
  });

  it("/rate-limited is rate limited once with the default Retry-After, then succeeds", async () => {
    expect(await outcomes(provider, simulatorPushEndpoint("rate-limited"), 2)).toEqual([
      failure("transient", "rate_limited", { retryAfterMs: 1000 }),
      success,
    ]);
  });

  it("the rate-limit delay is configurable", async () => {
    const quick = new SimulatorPushProvider({ rateLimitRetryAfterMs: 25 });
    expect(await quick.send(message(simulatorPushEndpoint("rate-limited"), 1))).toEqual(
      failure("transient", "rate_limited", { retryAfterMs: 25 }),
    );
  });

  it("/failed fails permanently on every attempt", async () => {
    expect(await outcomes(provider, simulatorPushEndpoint("failed"), 3)).toEqual([
      failure("permanent", "simulated_failure"),
      failure("permanent", "simulated_failure"),
      failure("permanent", "simulated_failure"),
    ]);
  });

  it("only the rate-limited endpoint carries a Retry-After", async () => {
    for (const outcome of Object.keys(SIMULATOR_PUSH_ENDPOINTS) as SimulatorPushOutcome[]) {
      const result = await provider.send(message(simulatorPushEndpoint(outcome), 1));
      if (result.ok) throw new Error(`${outcome} should fail on attempt 1`);
      expect(result.error.retryAfterMs !== undefined, outcome).toBe(outcome === "rate-limited");
    }
  });

  it("simulatorPushEndpoint builds the documented URLs", () => {
    expect(simulatorPushEndpoint("gone")).toBe("https://push.simulator.notify.test/gone");
    expect(simulatorPushEndpoint("gone", "user 42")).toBe(
      "https://push.simulator.notify.test/gone/user%2042",
    );
  });

  it("the exported table lists every special endpoint with a description", () => {
    expect(
      Object.fromEntries(Object.entries(SIMULATOR_PUSH_ENDPOINTS).map(([name, e]) => [name, e.description])),
    ).toEqual({
      gone: "rejected: subscription expired or unsubscribed (as a 410)",
      transient: "transient failure on every attempt",
      "transient-once": "transient failure on the first attempt, then success",
      "transient-twice": "transient failure on the first two attempts, then success",
      "rate-limited": "push service rate limit (429) on the first attempt, then success",
      failed: "permanent failure on every attempt (as a 400/403: bad VAPID or request)",
    });
  });

  it("failure messages say what was simulated", async () => {
    const outcome = await provider.send(message(simulatorPushEndpoint("gone"), 2));
    expect(outcome).toMatchObject({
      error: { message: expect.stringContaining("unsubscribed (as a 410) (attempt 2)") },
    });
  });
});
