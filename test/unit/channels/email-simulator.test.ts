import { describe, expect, it } from "vitest";
import type { EmailAddress, EmailMessage } from "../../../src/channels/email/providers/provider.js";
import {
  SIMULATOR_EMAIL_DOMAIN,
  SIMULATOR_MAILBOXES,
  SimulatorEmailProvider,
} from "../../../src/channels/email/providers/simulator.js";
import { attemptOutcomes, simulatedFailure } from "../../support/simulator-outcomes.js";

const ORDINARY = "ada@example.org";

function message(
  recipients: { to?: string[]; cc?: string[]; bcc?: string[] },
  attempt: number,
  messageId = "msg-1",
): EmailMessage {
  const addresses = (emails: string[] = []): EmailAddress[] => emails.map((email) => ({ email }));
  return {
    messageId,
    from: { email: "hello@example.com", name: "Example" },
    to: addresses(recipients.to),
    cc: addresses(recipients.cc),
    bcc: addresses(recipients.bcc),
    subject: "Welcome",
    html: "<p>Hi</p>",
    text: "Hi",
    attempt,
  };
}

function outcomes(provider: SimulatorEmailProvider, to: string, attempts: number) {
  return attemptOutcomes((attempt) => provider.send(message({ to: [to] }, attempt)), attempts);
}

const failure = simulatedFailure;
const success = {
  ok: true,
  provider: "simulator",
  providerMessageId: expect.stringMatching(/^SIM[0-9a-f]{32}$/),
};

describe("SimulatorEmailProvider", () => {
  const provider = new SimulatorEmailProvider();

  it("is named simulator", () => {
    expect(provider.name).toBe("simulator");
  });

  it("an ordinary address succeeds on the first attempt", async () => {
    expect(await provider.send(message({ to: [ORDINARY] }, 1))).toEqual(success);
  });

  it("the message id is stable for a message and attempt, and differs between them", async () => {
    const id = async (messageId: string, attempt: number) => {
      const outcome = await provider.send(message({ to: [ORDINARY] }, attempt, messageId));
      if (!outcome.ok) throw new Error("expected success");
      return outcome.providerMessageId;
    };
    expect(await id("a", 1)).toBe(await id("a", 1));
    expect(await id("a", 1)).not.toBe(await id("a", 2));
    expect(await id("a", 1)).not.toBe(await id("b", 1));
  });

  it("rejected@ is rejected as an unavailable mailbox on every attempt", async () => {
    expect(await outcomes(provider, `rejected@${SIMULATOR_EMAIL_DOMAIN}`, 3)).toEqual([
      failure("rejected", "mailbox_unavailable"),
      failure("rejected", "mailbox_unavailable"),
      failure("rejected", "mailbox_unavailable"),
    ]);
  });

  it("failed@ fails permanently on every attempt", async () => {
    expect(await outcomes(provider, `failed@${SIMULATOR_EMAIL_DOMAIN}`, 3)).toEqual([
      failure("permanent", "message_refused"),
      failure("permanent", "message_refused"),
      failure("permanent", "message_refused"),
    ]);
  });

  it("transient@ fails transiently on every attempt", async () => {
    const results = await outcomes(provider, `transient@${SIMULATOR_EMAIL_DOMAIN}`, 10);
    expect(results).toEqual(Array.from({ length: 10 }, () => failure("transient", "simulated_outage")));
  });

  it("transient-once@ fails transiently once, then succeeds", async () => {
    expect(await outcomes(provider, `transient-once@${SIMULATOR_EMAIL_DOMAIN}`, 3)).toEqual([
      failure("transient", "simulated_outage"),
      success,
      success,
    ]);
  });

  it("transient-twice@ fails transiently twice, then succeeds", async () => {
    expect(await outcomes(provider, `transient-twice@${SIMULATOR_EMAIL_DOMAIN}`, 4)).toEqual([
      failure("transient", "simulated_outage"),
      failure("transient", "simulated_outage"),
      success,
      success,
    ]);
  });

  it("rate-limited@ is rate limited once with the default Retry-After, then succeeds", async () => {
    expect(await outcomes(provider, `rate-limited@${SIMULATOR_EMAIL_DOMAIN}`, 2)).toEqual([
      failure("transient", "rate_limited", { retryAfterMs: 1000 }),
      success,
    ]);
  });

  it("the rate-limit delay is configurable", async () => {
    const quick = new SimulatorEmailProvider({ rateLimitRetryAfterMs: 25 });
    expect(await quick.send(message({ to: [`rate-limited@${SIMULATOR_EMAIL_DOMAIN}`] }, 1))).toEqual(
      failure("transient", "rate_limited", { retryAfterMs: 25 }),
    );
  });

  it("only the rate-limited address carries a Retry-After", async () => {
    for (const address of Object.keys(SIMULATOR_MAILBOXES)) {
      const outcome = await provider.send(message({ to: [address] }, 1));
      if (outcome.ok) throw new Error(`${address} should fail on attempt 1`);
      expect(outcome.error.retryAfterMs !== undefined, address).toBe(
        address === `rate-limited@${SIMULATOR_EMAIL_DOMAIN}`,
      );
    }
  });

  it("addresses match whatever their case", async () => {
    expect(await provider.send(message({ to: ["Rejected@Simulator.Notify.TEST"] }, 1))).toEqual(
      failure("rejected", "mailbox_unavailable"),
    );
  });

  it("a special address in cc decides when no to address is special", async () => {
    const m = message({ to: [ORDINARY], cc: [`failed@${SIMULATOR_EMAIL_DOMAIN}`] }, 1);
    expect(await provider.send(m)).toEqual(failure("permanent", "message_refused"));
  });

  it("a special address in bcc decides when no to or cc address is special", async () => {
    const m = message(
      { to: [ORDINARY], cc: ["bob@example.org"], bcc: [`transient@${SIMULATOR_EMAIL_DOMAIN}`] },
      1,
    );
    expect(await provider.send(m)).toEqual(failure("transient", "simulated_outage"));
  });

  it("the first special address in to, cc, bcc order wins", async () => {
    const m = message(
      {
        to: [ORDINARY, `transient@${SIMULATOR_EMAIL_DOMAIN}`, `rejected@${SIMULATOR_EMAIL_DOMAIN}`],
        cc: [`failed@${SIMULATOR_EMAIL_DOMAIN}`],
      },
      1,
    );
    expect(await provider.send(m)).toEqual(failure("transient", "simulated_outage"));
    const ccBeforeBcc = message(
      { cc: [`rejected@${SIMULATOR_EMAIL_DOMAIN}`], bcc: [`failed@${SIMULATOR_EMAIL_DOMAIN}`] },
      1,
    );
    expect(await provider.send(ccBeforeBcc)).toEqual(failure("rejected", "mailbox_unavailable"));
  });

  it("a special local part at another domain is ordinary", async () => {
    expect(await provider.send(message({ to: ["rejected@example.org"] }, 1))).toEqual(success);
  });

  it("an address that names an Object property is ordinary", async () => {
    expect(await provider.send(message({ to: ["__proto__", "constructor"] }, 1))).toEqual(success);
  });

  it("the exported table lists every special address with a description", () => {
    expect(
      Object.fromEntries(Object.entries(SIMULATOR_MAILBOXES).map(([address, m]) => [address, m.description])),
    ).toEqual({
      "rejected@simulator.notify.test": "rejected: mailbox does not exist",
      "failed@simulator.notify.test": "permanent failure: message refused",
      "transient@simulator.notify.test": "transient failure on every attempt",
      "transient-once@simulator.notify.test": "transient failure on the first attempt, then success",
      "transient-twice@simulator.notify.test": "transient failure on the first two attempts, then success",
      "rate-limited@simulator.notify.test": "rate limited on the first attempt, then success",
    });
  });

  it("failure messages say what was simulated, never the address (tenants read them)", async () => {
    const outcome = await provider.send(message({ to: [`rejected@${SIMULATOR_EMAIL_DOMAIN}`] }, 2));
    expect(outcome).toMatchObject({
      error: { message: "Simulator: rejected: mailbox does not exist (attempt 2)" },
    });
    expect(JSON.stringify(outcome)).not.toContain("@");
  });
});
