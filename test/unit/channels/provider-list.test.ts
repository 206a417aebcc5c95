import { describe, expect, it, vi } from "vitest";
import type { BreakerState } from "../../../src/channels/providers/breaker.js";
import type { Provider, ProviderMessage } from "../../../src/channels/providers/provider.js";
import { providerList } from "../../../src/channels/providers/provider-list.js";
import type { DeliveryError, DeliveryOutcome } from "../../../src/domain/delivery-outcome.js";

/**
 * The provider list (docs/decisions/0046) over scripted providers and a clock the test moves: which
 * provider each attempt goes to, when it moves on within the attempt and when it must not, the
 * breakers, the deadline, the order of a retry and of an organization's own list.
 */

type Answer =
  | "ok"
  | "429"
  | "503"
  | "refused"
  | "timeout"
  | "reset"
  | "rejected"
  | "permanent"
  | "account"
  | "sender"
  | "throws";

const errors: Record<
  Exclude<Answer, "ok" | "throws">,
  { error: DeliveryError; notTaken?: true; accountRefusal?: "account" | "sender" }
> = {
  "429": { error: { class: "transient", code: "http_429", message: "HTTP 429" }, notTaken: true },
  // A 503 may come from an edge after the provider made the message: not `notTaken`.
  "503": { error: { class: "transient", code: "http_503", message: "HTTP 503" } },
  refused: { error: { class: "transient", code: "network_error", message: "refused" }, notTaken: true },
  timeout: { error: { class: "transient", code: "timeout", message: "no answer" } },
  reset: { error: { class: "transient", code: "network_error", message: "reset" } },
  rejected: { error: { class: "rejected", code: "21211", message: "invalid number" } },
  permanent: { error: { class: "permanent", code: "21617", message: "body too long" } },
  // The account refused, not the recipient: its credentials, or this message's sender on it.
  account: {
    error: { class: "permanent", code: "20003", message: "authentication" },
    notTaken: true,
    accountRefusal: "account",
  },
  sender: {
    error: { class: "permanent", code: "21606", message: "From not this account's" },
    notTaken: true,
    accountRefusal: "sender",
  },
};

/** A provider answering what its script says next (then its `otherwise`), counting its calls. */
class Scripted implements Provider<ProviderMessage> {
  readonly calls: ProviderMessage[] = [];
  readonly timeoutMs = 5000;
  script: Answer[] = [];
  otherwise: Answer = "ok";
  constructor(readonly name: string) {}

  async send(message: ProviderMessage): Promise<DeliveryOutcome> {
    this.calls.push(message);
    const answer = this.script.shift() ?? this.otherwise;
    if (answer === "throws") throw new Error("boom");
    if (answer === "ok") return { ok: true, provider: this.name, providerMessageId: `${this.name}-id` };
    return { ok: false, provider: this.name, ...errors[answer] };
  }
}

function setUp(
  options: { failures?: number; cooldownMs?: number; byOrganization?: Map<string, string[]> } = {},
) {
  let now = 1_000_000;
  const primary = new Scripted("twilio:primary");
  const backup = new Scripted("twilio:backup");
  const failovers: Array<[string, string]> = [];
  const changes: Array<[string, BreakerState, BreakerState]> = [];
  const list = providerList({
    channel: "sms",
    accounts: [primary, backup],
    order: ["twilio:primary", "twilio:backup"],
    breaker: { failures: options.failures ?? 3, cooldownMs: options.cooldownMs ?? 30_000 },
    // One clock the test moves, for the deadlines and the cool-downs alike.
    now: () => now,
    clock: () => now,
    onFailover: (_channel, from, to) => failovers.push([from, to]),
    onBreakerChange: (_channel, provider, from, to) => changes.push([provider, from, to]),
    ...(options.byOrganization && { byOrganization: options.byOrganization }),
  });
  return {
    list,
    primary,
    backup,
    failovers,
    changes,
    advance: (ms: number) => {
      now += ms;
    },
    now: () => now,
  };
}

const message = (attempt = 1): ProviderMessage => ({ messageId: "m-1", attempt });

describe("one attempt through a provider list", () => {
  it("given the first provider answers, then it takes the attempt and the second is never called", async () => {
    const { list, primary, backup } = setUp();
    expect(await list.send(message())).toEqual({
      ok: true,
      provider: "twilio:primary",
      providerMessageId: "twilio:primary-id",
      failovers: [],
    });
    expect(primary.calls).toHaveLength(1);
    expect(backup.calls).toHaveLength(0);
  });

  it.each(["429", "refused"] as const)(
    "given the first provider %s (it provably did not take it), then the attempt moves to the second",
    async (answer) => {
      const { list, primary, backup, failovers } = setUp();
      primary.script = [answer];
      const outcome = await list.send(message());
      expect(outcome).toMatchObject({
        ok: true,
        provider: "twilio:backup",
        failovers: [{ provider: "twilio:primary", error: errors[answer].error }],
      });
      expect(backup.calls).toEqual([message()]);
      expect(failovers).toEqual([["twilio:primary", "twilio:backup"]]);
    },
  );

  it.each(["503", "timeout", "reset", "throws"] as const)(
    "given the first provider's %s (it may have taken it), then the attempt ends there: never two providers for one attempt",
    async (answer) => {
      const { list, primary, backup, failovers } = setUp();
      primary.script = [answer];
      const outcome = await list.send(message());
      expect(outcome).toMatchObject({ ok: false, provider: "twilio:primary", failovers: [] });
      expect(outcome.ok || outcome.error.class).toBe("transient");
      expect(backup.calls).toHaveLength(0);
      expect(failovers).toEqual([]);
    },
  );

  it.each(["rejected", "permanent"] as const)(
    "given the first provider's %s error, then the attempt never moves on",
    async (answer) => {
      const { list, primary, backup } = setUp();
      primary.script = [answer];
      const outcome = await list.send(message());
      expect(outcome).toMatchObject({ ok: false, provider: "twilio:primary", error: errors[answer].error });
      expect(backup.calls).toHaveLength(0);
    },
  );

  it.each(["account", "sender"] as const)(
    "given the first account refuses it (%s: not the recipient), then the attempt moves to the second",
    async (answer) => {
      const { list, primary, backup, failovers } = setUp();
      primary.script = [answer];
      expect(await list.send(message())).toMatchObject({
        ok: true,
        provider: "twilio:backup",
        failovers: [{ provider: "twilio:primary", error: errors[answer].error }],
      });
      expect(backup.calls).toHaveLength(1);
      expect(failovers).toEqual([["twilio:primary", "twilio:backup"]]);
    },
  );

  it("given every account refuses it as an account, then the attempt ends permanent, as with one account", async () => {
    const { list, primary, backup } = setUp();
    primary.script = ["account"];
    backup.script = ["sender"];
    expect(await list.send(message())).toMatchObject({
      ok: false,
      provider: "twilio:backup",
      error: errors.sender.error,
      failovers: [{ provider: "twilio:primary", error: errors.account.error }],
    });
  });

  it("given an account's refusal last while another account failed transiently, then the attempt ends transient: that one may take it later", async () => {
    const { list, primary, backup } = setUp();
    primary.script = ["429"];
    backup.script = ["account"];
    const outcome = await list.send(message());
    expect(outcome).toMatchObject({
      ok: false,
      provider: "twilio:backup",
      error: { ...errors.account.error, class: "transient" },
      failovers: [{ provider: "twilio:primary" }],
    });
  });

  it("given an account's refusal while the other account's breaker is open, then the attempt ends transient: its retry may find the other", async () => {
    const { list, primary, backup } = setUp({ failures: 1 });
    backup.script = ["timeout"];
    await list.send(message(), { triedLast: ["twilio:primary"] });
    expect(list.breakers?.()[1]?.state).toBe("open");
    primary.script = ["account"];
    expect(await list.send(message())).toMatchObject({
      ok: false,
      provider: "twilio:primary",
      error: { ...errors.account.error, class: "transient" },
      failovers: [],
    });
  });

  it("given both refuse it untaken, then the second's failure ends the attempt, naming the first", async () => {
    const { list, primary, backup } = setUp();
    primary.script = ["429"];
    backup.script = ["refused"];
    expect(await list.send(message())).toMatchObject({
      ok: false,
      provider: "twilio:backup",
      error: errors.refused.error,
      failovers: [{ provider: "twilio:primary" }],
    });
  });

  it("given the message's deadline passed while the first answered 429, then no second provider is called", async () => {
    const { list, primary, backup, now } = setUp();
    primary.script = ["429"];
    const outcome = await list.send(message(), { deadline: now() });
    expect(outcome).toMatchObject({ ok: false, provider: "twilio:primary", failovers: [] });
    expect(backup.calls).toHaveLength(0);
  });

  it("given a deadline already passed, then the first provider is still called (the attempt was started in time)", async () => {
    const { list, primary } = setUp();
    expect(await list.send(message(), { deadline: 0 })).toMatchObject({ ok: true });
    expect(primary.calls).toHaveLength(1);
  });

  it("given the previous attempt failed on the first provider, then this one goes to the second first", async () => {
    const { list, primary, backup } = setUp();
    const outcome = await list.send(message(2), { triedLast: ["twilio:primary"] });
    expect(outcome).toMatchObject({ ok: true, provider: "twilio:backup", failovers: [] });
    expect(primary.calls).toHaveLength(0);
    expect(backup.calls).toHaveLength(1);
  });

  it("given the previous attempt failed on both, then the order stays as configured", async () => {
    const { list, primary } = setUp();
    await list.send(message(2), { triedLast: ["twilio:primary", "twilio:backup"] });
    expect(primary.calls).toHaveLength(1);
  });

  it("given a retry that goes to the second first and finds it untaken, then it may still move on to the first", async () => {
    const { list, primary, backup } = setUp();
    backup.script = ["429"];
    const outcome = await list.send(message(2), { triedLast: ["twilio:primary"] });
    expect(outcome).toMatchObject({
      ok: true,
      provider: "twilio:primary",
      failovers: [{ provider: "twilio:backup" }],
    });
    expect(primary.calls).toHaveLength(1);
  });
});

describe("the breakers of a provider list", () => {
  it("given a run of failures on the first provider, then its breaker opens and attempts go straight to the second", async () => {
    const { list, primary, backup, changes } = setUp({ failures: 3 });
    primary.otherwise = "timeout";
    for (let i = 0; i < 3; i++) await list.send(message());
    expect(changes).toEqual([["twilio:primary", "closed", "open"]]);
    expect(list.breakers?.()).toEqual([
      { provider: "twilio:primary", state: "open" },
      { provider: "twilio:backup", state: "closed" },
    ]);
    const outcome = await list.send(message());
    expect(outcome).toMatchObject({ ok: true, provider: "twilio:backup", failovers: [] });
    expect(primary.calls).toHaveLength(3);
    expect(backup.calls).toHaveLength(1);
  });

  it("given an account's refusal of itself (credentials), then it counts against its breaker; of this message's sender, it does not", async () => {
    const { list, primary } = setUp({ failures: 2 });
    primary.script = ["sender", "sender", "sender"];
    for (let i = 0; i < 3; i++) await list.send(message());
    expect(list.breakers?.()[0]?.state).toBe("closed");
    primary.script = ["account", "account"];
    for (let i = 0; i < 2; i++) await list.send(message());
    expect(list.breakers?.()[0]?.state).toBe("open");
  });

  it("given a rejected recipient or a permanent error, then the run is broken: the provider answered", async () => {
    const { list, primary } = setUp({ failures: 2 });
    primary.script = ["timeout", "rejected", "timeout", "permanent", "timeout"];
    for (let i = 0; i < 5; i++) await list.send(message());
    expect(list.breakers?.()[0]?.state).toBe("closed");
  });

  it("given the cool-down over, then one probe goes to the first; its success brings the traffic back", async () => {
    const { list, primary, backup, advance, changes } = setUp({ failures: 1, cooldownMs: 30_000 });
    primary.script = ["refused"];
    await list.send(message()); // refused: opens, and the attempt moves to the backup
    expect(list.breakers?.()[0]?.state).toBe("open");
    advance(29_999);
    await list.send(message());
    expect(primary.calls).toHaveLength(1);
    advance(1);
    expect(list.breakers?.()[0]?.state).toBe("half_open");
    expect(await list.send(message())).toMatchObject({ provider: "twilio:primary" });
    expect(changes.map(([, from, to]) => `${from}→${to}`)).toEqual([
      "closed→open",
      "open→half_open",
      "half_open→closed",
    ]);
    await list.send(message());
    expect(primary.calls).toHaveLength(3);
    expect(backup.calls).toHaveLength(2);
  });

  it("given the probe fails untaken, then the breaker opens again and the attempt moves to the second", async () => {
    const { list, primary, backup, advance } = setUp({ failures: 1, cooldownMs: 1000 });
    primary.otherwise = "429";
    await list.send(message());
    advance(1000);
    expect(await list.send(message())).toMatchObject({ ok: true, provider: "twilio:backup" });
    expect(list.breakers?.()[0]?.state).toBe("open");
    expect(backup.calls).toHaveLength(2);
  });

  it("given every breaker open, then no provider is called ('none') and the list says when one will be ready", async () => {
    const { list, primary, backup, advance } = setUp({ failures: 1, cooldownMs: 10_000 });
    primary.otherwise = "refused";
    backup.otherwise = "refused";
    await list.send(message());
    expect(list.breakers?.().map((b) => b.state)).toEqual(["open", "open"]);
    advance(4000);
    expect(list.readyInMs?.()).toBe(6000);
    const outcome = await list.send(message());
    expect(outcome).toMatchObject({
      ok: false,
      provider: "none",
      error: { class: "transient", code: "providers_unavailable" },
      failovers: [],
    });
    expect(primary.calls.length + backup.calls.length).toBe(2);
  });

  it("given a half-open breaker's probe under way, then the list asks to wait a little, not a whole cool-down", async () => {
    const { list, primary, backup, advance } = setUp({ failures: 1, cooldownMs: 10_000 });
    primary.otherwise = "refused";
    backup.otherwise = "refused";
    await list.send(message());
    advance(10_000);
    expect(list.readyInMs?.()).toBe(0);
    let answer: (outcome: DeliveryOutcome) => void = () => {};
    primary.send = () => new Promise((resolve) => (answer = resolve));
    const probing = list.send(message());
    expect(list.readyInMs?.()).toBe(0); // the backup's probe is still free
    backup.send = () => new Promise(() => {});
    void list.send(message());
    expect(list.readyInMs?.()).toBe(1000);
    answer({ ok: true, provider: "twilio:primary", providerMessageId: "x" });
    await probing;
    expect(list.readyInMs?.()).toBe(0);
  });
});

describe("a call reserved before the attempt is recorded", () => {
  it("given a half-open breaker, then one reservation takes its probe, the next finds none, and the attempt goes through on it", async () => {
    let clock = 0;
    const primary = new Scripted("twilio:primary");
    const only = providerList({
      channel: "sms",
      accounts: [primary],
      order: ["twilio:primary"],
      breaker: { failures: 1, cooldownMs: 1000 },
      now: () => clock,
      clock: () => clock,
    });
    primary.script = ["timeout"];
    await only.send(message());
    clock += 1000;
    const reservation = only.reserve?.();
    expect(reservation?.provider).toBe("twilio:primary");
    expect(only.reserve?.()).toBeUndefined();
    expect(await only.send(message(), { ...(reservation && { reservation }) })).toMatchObject({
      ok: true,
      provider: "twilio:primary",
    });
    expect(only.breakers?.()).toEqual([{ provider: "twilio:primary", state: "closed" }]);
    reservation?.release(); // used already: changes nothing
    expect(primary.calls).toHaveLength(2);
  });

  it("given a reservation released unused (the attempt did not start), then the probe is free again", async () => {
    const { list, primary, advance } = setUp({ failures: 1, cooldownMs: 1000 });
    primary.script = ["refused"];
    await list.send(message());
    advance(1000);
    const reservation = list.reserve?.();
    expect(reservation?.provider).toBe("twilio:primary");
    expect(list.reserve?.(["twilio:backup"])?.provider).toBe("twilio:backup");
    reservation?.release();
    expect(list.reserve?.()?.provider).toBe("twilio:primary");
  });

  it("given the previous attempt failed on the first, then the reservation is the second's", () => {
    const { list } = setUp();
    expect(list.reserve?.(["twilio:primary"])?.provider).toBe("twilio:backup");
  });

  it("given every breaker open, then nothing is reserved", async () => {
    const { list, primary, backup } = setUp({ failures: 1, cooldownMs: 10_000 });
    primary.otherwise = "refused";
    backup.otherwise = "refused";
    await list.send(message());
    expect(list.reserve?.()).toBeUndefined();
  });
});

describe("the hooks and the clock of a provider list", () => {
  it("given onFailover throwing, then the attempt still moves on and the next provider's probe is settled, never stuck", async () => {
    let now = 1_000_000;
    const primary = new Scripted("twilio:primary");
    const backup = new Scripted("twilio:backup");
    const list = providerList({
      channel: "sms",
      accounts: [primary, backup],
      order: ["twilio:primary", "twilio:backup"],
      breaker: { failures: 1, cooldownMs: 1000 },
      now: () => now,
      clock: () => now,
      onFailover: () => {
        throw new Error("a metrics hook failed");
      },
    });
    // The backup's breaker opens, then its cool-down ends: its next call is its one probe.
    backup.script = ["timeout"];
    await list.send(message(), { triedLast: ["twilio:primary"] });
    now += 1000;
    primary.script = ["refused"];
    expect(await list.send(message())).toMatchObject({ ok: true, provider: "twilio:backup" });
    expect(list.breakers?.()[1]).toEqual({ provider: "twilio:backup", state: "closed" });
    expect(list.readyInMs?.()).toBe(0);
  });

  it("given no clock, then the breakers' cool-downs run on a monotonic clock: a wall clock jumping ahead does not end them", async () => {
    const wall = vi.spyOn(Date, "now");
    try {
      const primary = new Scripted("twilio:primary");
      const backup = new Scripted("twilio:backup");
      const list = providerList({
        channel: "sms",
        accounts: [primary, backup],
        order: ["twilio:primary", "twilio:backup"],
        breaker: { failures: 1, cooldownMs: 60_000 },
      });
      primary.script = ["timeout"];
      await list.send(message());
      expect(list.breakers?.()[0]?.state).toBe("open");
      const at = Date.now();
      wall.mockReturnValue(at + 3_600_000);
      expect(list.breakers?.()[0]?.state).toBe("open");
      await list.send(message());
      expect(primary.calls).toHaveLength(1);
    } finally {
      wall.mockRestore();
    }
  });
});

describe("organizations' own lists", () => {
  it("given an organization with its own order, then its messages follow it; the others the default; breakers are shared", async () => {
    const { list, primary, backup } = setUp({
      failures: 1,
      byOrganization: new Map([["org-b", ["twilio:backup", "twilio:primary"]]]),
    });
    const own = list.forOrganization?.("org-b");
    expect(own?.name).toBe("twilio:backup,twilio:primary");
    expect(list.forOrganization?.("org-a")).toBe(list);
    await own?.send(message());
    expect(backup.calls).toHaveLength(1);
    backup.script = ["refused"];
    await own?.send(message()); // opens the backup's breaker, moves to the primary
    expect(primary.calls).toHaveLength(1);
    await list.send(message());
    expect(list.breakers?.()).toEqual([
      { provider: "twilio:primary", state: "closed" },
      { provider: "twilio:backup", state: "open" },
    ]);
  });

  it("refuses a list naming an account it was not given, and an account given twice", () => {
    const primary = new Scripted("twilio:primary");
    const breaker = { failures: 1, cooldownMs: 1 };
    expect(() =>
      providerList({ channel: "sms", accounts: [primary], order: ["twilio:backup"], breaker }),
    ).toThrow(/no account twilio:backup/);
    expect(() =>
      providerList({ channel: "sms", accounts: [primary, primary], order: ["twilio:primary"], breaker }),
    ).toThrow(/listed twice/);
  });

  it("its time-out is the worst case of its longest list: each provider answering just before its own", () => {
    const { list } = setUp({ byOrganization: new Map([["org-b", ["twilio:backup"]]]) });
    expect(list.timeoutMs).toBe(10_000);
  });
});
