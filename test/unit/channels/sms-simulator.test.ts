import { describe, expect, it } from "vitest";
import { createSmsProvider } from "../../../src/channels/sms/providers/index.js";
import type { SmsMessage } from "../../../src/channels/sms/providers/provider.js";
import { SIMULATOR_RECIPIENTS, SimulatorSmsProvider } from "../../../src/channels/sms/providers/simulator.js";
import { attemptOutcomes, simulatedFailure } from "../../support/simulator-outcomes.js";

function message(to: string, attempt: number, messageId = "msg-1"): SmsMessage {
  return { messageId, to, from: "Notify", body: "Your code is 123456", attempt };
}

function outcomes(provider: SimulatorSmsProvider, to: string, attempts: number) {
  return attemptOutcomes((attempt) => provider.send(message(to, attempt)), attempts);
}

const failure = simulatedFailure;
const success = {
  ok: true,
  provider: "simulator",
  providerMessageId: expect.stringMatching(/^SIM[0-9a-f]{32}$/),
};

describe("SimulatorSmsProvider", () => {
  const provider = new SimulatorSmsProvider();

  it("is named simulator", () => {
    expect(provider.name).toBe("simulator");
  });

  it("an ordinary number succeeds on the first attempt", async () => {
    expect(await provider.send(message("+447700900123", 1))).toEqual(success);
  });

  it("the message id is stable for a message and attempt, and differs between them", async () => {
    const id = async (messageId: string, attempt: number) => {
      const outcome = await provider.send(message("+447700900123", attempt, messageId));
      if (!outcome.ok) throw new Error("expected success");
      return outcome.providerMessageId;
    };
    expect(await id("a", 1)).toBe(await id("a", 1));
    expect(await id("a", 1)).not.toBe(await id("a", 2));
    expect(await id("a", 1)).not.toBe(await id("b", 1));
  });

  it.each([
    ["+15005550001", "invalid_number"],
    ["+15005550004", "opted_out"],
    ["+15005550009", "not_mobile"],
  ])("%s is rejected with %s on every attempt", async (to, code) => {
    expect(await outcomes(provider, to, 4)).toEqual([
      failure("rejected", code),
      failure("rejected", code),
      failure("rejected", code),
      failure("rejected", code),
    ]);
  });

  it("+15005550500 fails transiently on every attempt", async () => {
    const results = await outcomes(provider, "+15005550500", 10);
    expect(results).toEqual(Array.from({ length: 10 }, () => failure("transient", "simulated_outage")));
  });

  it("+15005550501 fails transiently once, then succeeds", async () => {
    expect(await outcomes(provider, "+15005550501", 3)).toEqual([
      failure("transient", "simulated_outage"),
      success,
      success,
    ]);
  });

  it("+15005550502 fails transiently twice, then succeeds", async () => {
    expect(await outcomes(provider, "+15005550502", 4)).toEqual([
      failure("transient", "simulated_outage"),
      failure("transient", "simulated_outage"),
      success,
      success,
    ]);
  });

  it("+15005550429 is rate limited once with the default Retry-After, then succeeds", async () => {
    expect(await outcomes(provider, "+15005550429", 2)).toEqual([
      failure("transient", "rate_limited", { retryAfterMs: 1000 }),
      success,
    ]);
  });

  it("the rate-limit delay is configurable", async () => {
    const quick = new SimulatorSmsProvider({ rateLimitRetryAfterMs: 25 });
    expect(await quick.send(message("+15005550429", 1))).toEqual(
      failure("transient", "rate_limited", { retryAfterMs: 25 }),
    );
  });

  it("only the rate-limited recipient carries a Retry-After", async () => {
    for (const to of Object.keys(SIMULATOR_RECIPIENTS)) {
      const outcome = await provider.send(message(to, 1));
      if (outcome.ok) throw new Error(`${to} should fail on attempt 1`);
      expect(outcome.error.retryAfterMs !== undefined, to).toBe(to === "+15005550429");
    }
  });

  it("the exported table lists every special recipient with a description", () => {
    expect(
      Object.fromEntries(Object.entries(SIMULATOR_RECIPIENTS).map(([to, r]) => [to, r.description])),
    ).toEqual({
      "+15005550001": "rejected: invalid number",
      "+15005550004": "rejected: recipient opted out",
      "+15005550009": "rejected: not a mobile number",
      "+15005550500": "transient failure on every attempt",
      "+15005550501": "transient failure on the first attempt, then success",
      "+15005550502": "transient failure on the first two attempts, then success",
      "+15005550429": "provider rate limit (429) on the first attempt, then success",
    });
  });

  it("failure messages say what was simulated", async () => {
    const outcome = await provider.send(message("+15005550004", 1));
    expect(outcome).toMatchObject({ error: { message: expect.stringContaining("opted out") } });
  });

  it("createSmsProvider builds the simulator from config, passing the rate-limit delay through", async () => {
    const p = createSmsProvider(
      {
        SMS_PROVIDER: "simulator",
        TWILIO_ACCOUNT_SID: undefined,
        TWILIO_AUTH_TOKEN: undefined,
        TWILIO_BASE_URL: "https://api.twilio.com",
        TWILIO_TIMEOUT_MS: 10_000,
      },
      { simulatorRateLimitRetryAfterMs: 5 },
    );
    expect(p).toBeInstanceOf(SimulatorSmsProvider);
    expect(await p.send(message("+15005550429", 1))).toEqual(
      failure("transient", "rate_limited", { retryAfterMs: 5 }),
    );
  });
});
