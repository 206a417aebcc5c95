import pino from "pino";
import { describe, expect, it } from "vitest";
import type { MessageContent } from "../../../src/domain/events.js";
import type { Take, TakeOptions, ThroughputLimiter } from "../../../workers/throughput-limiter.js";
import {
  type Admission,
  createThroughputLimits,
  EARLY_RETURN_MS,
  LIMITER_UNAVAILABLE_WAIT_MS,
  MAX_REFRESH_WAIT_MS,
  staleAfterMs,
  type ThroughputSettings,
  ThroughputWait,
} from "../../../workers/throughput-limits.js";
import { content, HOUR, NOW } from "../domain/given.js";

/**
 * Which limits a delivery is under and what the worker does with the limiter's answers
 * (docs/decisions/0048). The limiter's Redis arithmetic is tested against Redis
 * (test/integration/workers/throughput-limiter.test.ts); here it answers from a script.
 */

const SETTINGS: ThroughputSettings = {
  QUEUE_PREFIX: "ntf",
  SMS_SENDER_RATE: 1,
  SMS_SENDER_RATES: new Map([
    ["ACME", 10],
    ["FREE", 0],
  ]),
  SMS_PROVIDER_RATE: 100,
  EMAIL_PROVIDER_RATE: 14,
};

/** A limiter that answers each take with the next scripted answer, and records the takes. */
function scriptedLimiter(...answers: Array<Take | Error>) {
  const takes: Array<{ key: string } & TakeOptions> = [];
  const limiter: ThroughputLimiter = {
    async take(key, options) {
      takes.push({ key, ...options });
      const answer = answers.shift() ?? { granted: true };
      if (answer instanceof Error) throw answer;
      return answer;
    },
  };
  return { limiter, takes };
}

function limitsWith(
  limiter: ThroughputLimiter | undefined,
  options: { holdSlots?: number; settings?: Partial<ThroughputSettings> } = {},
) {
  return createThroughputLimits({
    settings: { ...SETTINGS, ...options.settings },
    limiter,
    holdSlots: options.holdSlots ?? 2,
    logger: pino({ level: "silent" }),
    random: () => 0,
  });
}

const email = { ...content(), channel: "email", sender: "hello@acme.test" } as unknown as MessageContent;
const push = { ...content(), channel: "push", sender: "mailto:ops@acme.test" } as unknown as MessageContent;

async function waitOf(promise: Promise<unknown>): Promise<ThroughputWait> {
  const error = await promise.then(
    () => undefined,
    (caught: unknown) => caught,
  );
  if (!(error instanceof ThroughputWait)) throw new Error(`expected a ThroughputWait, got ${String(error)}`);
  return error;
}

describe("which limits a delivery attempt is under", () => {
  const { limitsOf } = limitsWith(undefined);

  it("given an SMS, then its sender's limit (an override, compared in upper case), then its provider account's", () => {
    expect(limitsOf(content({ sender: "Acme" }), "twilio")).toEqual([
      { name: "sms_sender", key: "ntf:throughput:sms-sender:ACME", rate: 10 },
      { name: "provider_account", key: "ntf:throughput:account:sms:twilio", rate: 100 },
    ]);
  });

  it("given a sender no override names, then SMS_SENDER_RATE; an override of 0 lifts the limit", () => {
    expect(limitsOf(content({ sender: "+14155550100" }), "twilio")[0]).toEqual({
      name: "sms_sender",
      key: "ntf:throughput:sms-sender:+14155550100",
      rate: 1,
    });
    expect(limitsOf(content({ sender: "FREE" }), "twilio").map((l) => l.name)).toEqual(["provider_account"]);
  });

  it("given an e-mail, then its account's limit only; a push message, none", () => {
    expect(limitsOf(email, "smtp")).toEqual([
      { name: "provider_account", key: "ntf:throughput:account:email:smtp", rate: 14 },
    ]);
    expect(limitsOf(push, "webpush")).toEqual([]);
  });

  it("given every rate 0, then no limit at all", () => {
    const none = limitsWith(undefined, {
      settings: {
        SMS_SENDER_RATE: 0,
        SMS_SENDER_RATES: new Map(),
        SMS_PROVIDER_RATE: 0,
        EMAIL_PROVIDER_RATE: 0,
      },
    });
    expect(none.limitsOf(content(), "twilio")).toEqual([]);
    expect(none.limitsOf(email, "smtp")).toEqual([]);
  });
});

describe("admitting a delivery attempt", () => {
  const now = NOW;

  it("given tokens, then it takes the sender's and the account's, as a newcomer, with the time to live as deadline", async () => {
    const { limiter, takes } = scriptedLimiter();
    await limitsWith(limiter).admit(content(), "twilio", { turn: undefined, now });
    const deadlineMs = expect.closeTo(24 * HOUR, -2); // within 50 ms: the time the test took
    expect(takes).toEqual([
      { key: "ntf:throughput:sms-sender:ACME", rate: 10, mode: "new", deadlineMs, turn: 0 },
      { key: "ntf:throughput:account:sms:twilio", rate: 100, mode: "new", deadlineMs, turn: 0 },
    ]);
  });

  it("given a job that kept a turn, then it comes back with that turn to its limit, and as returning to the others", async () => {
    const { limiter, takes } = scriptedLimiter();
    const turn = { key: "ntf:throughput:sms-sender:ACME", turn: 1_795_000_000_000_000 };
    await limitsWith(limiter).admit(content(), "twilio", { turn, now });
    expect(takes.map(({ mode, turn: t }) => ({ mode, turn: t }))).toEqual([
      { mode: "returning", turn: turn.turn },
      { mode: "returning", turn: 0 },
    ]);
  });

  it("given a critical message, then it asks as urgent", async () => {
    const { limiter, takes } = scriptedLimiter();
    await limitsWith(limiter).admit(content({ priority: "critical" }), "twilio", { turn: undefined, now });
    expect(takes.map((t) => t.mode)).toEqual(["urgent", "urgent"]);
  });

  it("given a far turn, then the job is handed back to come a little before it, keeping the turn, nothing else taken", async () => {
    const { limiter, takes } = scriptedLimiter({ granted: false, waitMs: 5000, turn: 42 });
    const wait = await waitOf(limitsWith(limiter).admit(content(), "twilio", { turn: undefined, now }));
    expect(wait).toMatchObject({
      waitMs: 5000 - EARLY_RETURN_MS,
      limit: "sms_sender",
      turn: { key: "ntf:throughput:sms-sender:ACME", turn: 42 },
      labels: { channel: "sms", senderKind: "alphanumeric", provider: "twilio" },
    });
    expect(takes).toHaveLength(1);
  });

  it("given a near turn, then it waits in process and takes again with its turn, as returning", async () => {
    const { limiter, takes } = scriptedLimiter({ granted: false, waitMs: 5, turn: 42 }, { granted: true });
    await limitsWith(limiter).admit(content(), "twilio", { turn: undefined, now });
    expect(takes.map(({ mode, turn }) => ({ mode, turn }))).toEqual([
      { mode: "new", turn: 0 },
      { mode: "returning", turn: 42 },
      { mode: "new", turn: 0 }, // the account's
    ]);
  });

  it("given a near turn and no hold slot free, then the job is handed back to the turn itself", async () => {
    const { limiter } = scriptedLimiter({ granted: false, waitMs: 150, turn: 42 });
    const wait = await waitOf(
      limitsWith(limiter, { holdSlots: 0 }).admit(content(), "twilio", { turn: undefined, now }),
    );
    expect(wait.waitMs).toBe(150);
  });

  it("given the account's refusal after the sender's token, then the wait names the account", async () => {
    const { limiter } = scriptedLimiter({ granted: true }, { granted: false, waitMs: 1000, turn: 7 });
    const wait = await waitOf(limitsWith(limiter).admit(content(), "twilio", { turn: undefined, now }));
    expect(wait).toMatchObject({
      limit: "provider_account",
      turn: { key: "ntf:throughput:account:sms:twilio", turn: 7 },
    });
  });

  it("given a turn past the time to live, then the job is handed back until it expires, keeping no turn", async () => {
    const { limiter } = scriptedLimiter({ granted: false, waitMs: 900_000, turn: 0 });
    const expiring = content({ expiresAt: new Date(NOW.getTime() + 60_000).toISOString() });
    const wait = await waitOf(limitsWith(limiter).admit(expiring, "twilio", { turn: undefined, now }));
    expect(wait.turn).toBeUndefined();
    expect(wait.waitMs).toBeLessThanOrEqual(60_000);
    expect(wait.waitMs).toBeGreaterThan(59_000);
  });

  it("given a limiter that does not answer, then the job waits a second: nothing is sent over a limit", async () => {
    const { limiter } = scriptedLimiter(new Error("Redis away"));
    const wait = await waitOf(limitsWith(limiter).admit(content(), "twilio", { turn: undefined, now }));
    expect(wait).toMatchObject({
      limit: "unavailable",
      waitMs: LIMITER_UNAVAILABLE_WAIT_MS,
      turn: undefined,
    });
  });

  it("given no limit, then the limiter is not asked and there is nothing to refresh", async () => {
    const { limiter, takes } = scriptedLimiter();
    expect(await limitsWith(limiter).admit(push, "webpush", { turn: undefined, now })).toBeUndefined();
    expect(takes).toEqual([]);
  });

  it("given tokens, then the admission names each limit with when its token was granted", async () => {
    const { limiter } = scriptedLimiter();
    const before = performance.now();
    const admission = await limitsWith(limiter).admit(content(), "twilio", { turn: undefined, now });
    expect(admission?.tokens.map((t) => t.limit.name)).toEqual(["sms_sender", "provider_account"]);
    for (const { grantedAt } of admission?.tokens ?? []) {
      expect(grantedAt).toBeGreaterThanOrEqual(before);
      expect(grantedAt).toBeLessThanOrEqual(performance.now());
    }
  });
});

describe("refreshing the tokens once the attempt is recorded", () => {
  const sender = { name: "sms_sender", key: "ntf:throughput:sms-sender:ACME", rate: 10 } as const;
  const account = { name: "provider_account", key: "ntf:throughput:account:sms:twilio", rate: 100 } as const;
  /** An admission whose tokens were granted `agesMs` ago. */
  const admitted = (agesMs: number[], deadlineMs = HOUR): Admission => ({
    tokens: agesMs.map((age, i) => ({
      limit: i === 0 ? sender : account,
      grantedAt: performance.now() - age,
    })),
    deadlineMs: () => deadlineMs,
    labels: { channel: "sms", senderKind: "alphanumeric", provider: "twilio" },
  });

  it("given how old a token may be, then one interval of its limit, and never under 100 ms", () => {
    expect(staleAfterMs({ rate: 1 })).toBe(1000);
    expect(staleAfterMs({ rate: 10 })).toBe(100);
    expect(staleAfterMs({ rate: 100 })).toBe(100);
    expect(staleAfterMs({ rate: 0.001 })).toBe(1_000_000);
  });

  it("given tokens younger than that, then the limiter is not asked", async () => {
    const { limiter, takes } = scriptedLimiter();
    expect(await limitsWith(limiter).refresh(admitted([40, 40]))).toEqual([]);
    expect(takes).toEqual([]);
  });

  it("given a token older than that (a slow commit), then a new one is taken from the urgent line", async () => {
    const { limiter, takes } = scriptedLimiter();
    expect(await limitsWith(limiter).refresh(admitted([200, 20]))).toEqual([sender]);
    expect(takes).toEqual([{ key: sender.key, rate: 10, mode: "urgent", deadlineMs: HOUR, turn: 0 }]);
  });

  it("given a refusal, then it waits in process for its turn however many holds are busy, and takes again with it", async () => {
    const { limiter, takes } = scriptedLimiter(
      { granted: false, waitMs: 30, turn: 42 },
      { granted: false, waitMs: 5, turn: 43 },
      { granted: true },
    );
    const started = performance.now();
    expect(await limitsWith(limiter, { holdSlots: 0 }).refresh(admitted([200, 200]))).toEqual([
      sender,
      account,
    ]);
    expect(performance.now() - started).toBeGreaterThanOrEqual(34);
    expect(takes.map(({ key, mode, turn }) => ({ key, mode, turn }))).toEqual([
      { key: sender.key, mode: "urgent", turn: 0 },
      { key: sender.key, mode: "urgent", turn: 42 },
      { key: sender.key, mode: "urgent", turn: 43 },
      { key: account.key, mode: "urgent", turn: 0 },
    ]);
  });

  it("given a wait for one token that ages the other past its limit, then that one is taken again too", async () => {
    // The account's token is fresh (60 ms) until the sender's wait of 60 ms.
    const { limiter, takes } = scriptedLimiter({ granted: false, waitMs: 60, turn: 42 }, { granted: true });
    expect(await limitsWith(limiter).refresh(admitted([200, 60]))).toEqual([sender, account]);
    expect(takes.map(({ key, turn }) => ({ key, turn }))).toEqual([
      { key: sender.key, turn: 0 },
      { key: sender.key, turn: 42 },
      { key: account.key, turn: 0 },
    ]);
  });

  it("given a turn past the time to live, then it does not wait and counts nothing: the attempt goes on to meet its deadline", async () => {
    const { limiter, takes } = scriptedLimiter({ granted: false, waitMs: 60_000, turn: 0 });
    expect(await limitsWith(limiter).refresh(admitted([200], 50_000))).toEqual([]);
    expect(takes).toHaveLength(1);
  });

  it("given a turn further than the longest wait, then it does not wait and counts nothing", async () => {
    const { limiter, takes } = scriptedLimiter({ granted: false, waitMs: MAX_REFRESH_WAIT_MS + 1, turn: 9 });
    expect(await limitsWith(limiter).refresh(admitted([200]))).toEqual([]);
    expect(takes).toHaveLength(1);
  });

  it("given a limiter that does not answer, then the send goes on with its tokens, counting nothing", async () => {
    const { limiter, takes } = scriptedLimiter(new Error("Redis away"));
    await expect(limitsWith(limiter).refresh(admitted([200, 200]))).resolves.toEqual([]);
    expect(takes).toHaveLength(1);
  });
});
