import { randomUUID } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createRedis } from "../../../src/runtime/redis.js";
import {
  createThroughputLimiter,
  type LineMode,
  type ThroughputLimiter,
} from "../../../workers/throughput-limiter.js";
import { busiestWindow } from "../../support/busiest-window.js";
import { silentLogger } from "../../support/harness.js";
import { RedisClusterUnderTest } from "../../support/redis-topologies.js";

/**
 * The throughput limiter's script (docs/decisions/0048) against the machine's Redis: its
 * precision with many callers, its line, the urgent lane, the deadline, and on a Redis Cluster.
 */
const redis = new Redis(process.env.REDIS_URL ?? "redis://127.0.0.1:6379");
const limiter = createThroughputLimiter(redis);
const prefix = `test-throughput-${randomUUID().slice(0, 8)}`;
const key = () => `${prefix}:${randomUUID().slice(0, 8)}`;

afterAll(async () => {
  const keys = await redis.keys(`${prefix}:*`);
  if (keys.length > 0) await redis.del(...keys);
  redis.disconnect();
});

/**
 * `messages` senders sharing one limit, as workers' jobs do: each takes, and when refused waits
 * until its turn and comes back as `returning` with it. Resolves with each grant's time (ms) and
 * how many takes were refused in all.
 */
async function drain(
  on: ThroughputLimiter,
  limitKey: string,
  rate: number,
  messages: number,
): Promise<{ grants: number[]; refused: number }> {
  const grants: number[] = [];
  let refused = 0;
  await Promise.all(
    Array.from({ length: messages }, async () => {
      let turn = 0;
      for (let mode: LineMode = "new"; ; mode = "returning") {
        const taken = await on.take(limitKey, { rate, mode, turn });
        if (taken.granted) {
          grants.push(performance.now());
          return;
        }
        refused++;
        turn = taken.turn;
        await sleep(taken.waitMs);
      }
    }),
  );
  return { grants: grants.sort((a, b) => a - b), refused };
}

describe("the throughput limiter's precision", () => {
  it("holds 60 messages arriving at once to 20 a second: at most 22 in any second (the arithmetic's bound), each refused about once", async () => {
    const { grants, refused } = await drain(limiter, key(), 20, 60);

    expect(grants).toHaveLength(60);
    // Grants n apart span at least n × 50 ms - 50 ms (the tolerance, here one interval): 22 at
    // most in a second, 42 in two.
    expect(busiestWindow(grants, 1000)).toBeLessThanOrEqual(22);
    expect(busiestWindow(grants, 2000)).toBeLessThanOrEqual(42);
    // 58 had to wait (the second goes at once, inside the tolerance); the line brings
    // them back one per interval, so few are refused twice.
    expect(refused).toBeGreaterThanOrEqual(58);
    expect(refused).toBeLessThan(58 * 1.5);
    // ~3 s: the line keeps the limit busy (nothing like a herd's lost turns).
    expect((grants.at(-1) as number) - (grants[0] as number)).toBeLessThan(3500);
  });
});

describe("the line", () => {
  /** A refused take (the test fails if it was granted). */
  async function refusedTake(k: string, options: Parameters<ThroughputLimiter["take"]>[1]) {
    const taken = await limiter.take(k, options);
    if (taken.granted) throw new Error("granted over the limit");
    return taken;
  }

  it("gives the messages refused one after another turns one interval apart, in order", async () => {
    const k = key();
    expect(await limiter.take(k, { rate: 10, mode: "new" })).toEqual({ granted: true });
    const refusals: Array<{ turn: number; waitMs: number }> = [];
    for (let i = 0; i < 4; i++) refusals.push(await refusedTake(k, { rate: 10, mode: "new" }));
    // Turns one interval (100,000 µs) apart; each told to come half the tolerance (25 ms) before
    // its turn, ~100, 200, 300, 400 ms ahead (less the few ms the calls took).
    refusals.forEach(({ turn, waitMs }, i) => {
      expect(turn - (refusals[0]?.turn ?? 0)).toBe(i * 100_000);
      expect(waitMs).toBeGreaterThan((i + 1) * 100 - 25 - 30);
      expect(waitMs).toBeLessThanOrEqual((i + 1) * 100 - 25);
    });
  });

  it("keeps a newcomer behind the line when a token comes free; the message whose turn it is takes it", async () => {
    const k = key();
    await limiter.take(k, { rate: 10, mode: "new" });
    const first = await refusedTake(k, { rate: 10, mode: "new" });
    await sleep(first.waitMs);

    const newcomer = await refusedTake(k, { rate: 10, mode: "new" });
    expect(newcomer.turn).toBe(first.turn + 100_000);
    expect(await limiter.take(k, { rate: 10, mode: "returning", turn: first.turn })).toEqual({
      granted: true,
    });
  });

  it("keeps a returning message's turn when it comes back early", async () => {
    const k = key();
    await limiter.take(k, { rate: 10, mode: "new" });
    const booked = [];
    for (let i = 0; i < 3; i++) booked.push(await refusedTake(k, { rate: 10, mode: "new" }));
    const third = booked[2]?.turn ?? 0;
    const early = await refusedTake(k, { rate: 10, mode: "returning", turn: third });
    expect(early.turn).toBe(third);
    // Not the end of the line (a fourth turn): its own, ~300 ms ahead.
    expect(early.waitMs).toBeLessThanOrEqual(300 - 25);
    expect((await refusedTake(k, { rate: 10, mode: "new" })).turn).toBe(third + 100_000);
  });

  it("lets an urgent message go first: it comes before the ordinary one booked on its token, which then waits for the next", async () => {
    const k = key();
    await limiter.take(k, { rate: 10, mode: "new" });
    const ordinary = await refusedTake(k, { rate: 10, mode: "new" });
    const urgent = await refusedTake(k, { rate: 10, mode: "urgent" });
    expect(urgent.turn).toBe(ordinary.turn);
    // Nine tenths of the tolerance early instead of half: 20 ms ahead of the ordinary message.
    expect(ordinary.waitMs - urgent.waitMs).toBeGreaterThanOrEqual(18);
    await sleep(urgent.waitMs);
    expect(await limiter.take(k, { rate: 10, mode: "urgent", turn: urgent.turn })).toEqual({ granted: true });

    // The ordinary message's token is gone; the next one is at most an interval later: it waits for it.
    await sleep(Math.max(0, ordinary.waitMs - urgent.waitMs));
    const next = await refusedTake(k, { rate: 10, mode: "returning", turn: ordinary.turn });
    expect(next.turn).toBe(ordinary.turn + 100_000);
    expect(next.waitMs).toBeGreaterThan(50);
  });

  it("sends a message whose turn was taken by more than an interval to the end of the line", async () => {
    const k = key();
    await limiter.take(k, { rate: 10, mode: "new" });
    const ordinary = await refusedTake(k, { rate: 10, mode: "new" });
    const second = await refusedTake(k, { rate: 10, mode: "new" });
    // Two urgent messages take the ordinary one's token and the next.
    const urgent = [
      await refusedTake(k, { rate: 10, mode: "urgent" }),
      await refusedTake(k, { rate: 10, mode: "urgent" }),
    ];
    for (const u of urgent) {
      await sleep(u.waitMs);
      await limiter.take(k, { rate: 10, mode: "urgent", turn: u.turn });
    }
    const bumped = await refusedTake(k, { rate: 10, mode: "returning", turn: ordinary.turn });
    // After the second ordinary turn, the line's end (later by what the urgent takes were late).
    expect(bumped.turn).toBeGreaterThanOrEqual(second.turn + 100_000);
    expect(bumped.turn).toBeLessThan(second.turn + 150_000);
  });

  it("books no turn past the deadline: the next message is given the same one", async () => {
    const k = key();
    await limiter.take(k, { rate: 1, mode: "new" });
    const late = await refusedTake(k, { rate: 1, mode: "new", deadlineMs: 500 });
    expect(late.turn).toBe(0);
    expect(late.waitMs).toBeGreaterThan(500);
    const next = await refusedTake(k, { rate: 1, mode: "new" });
    expect(next.turn).toBeGreaterThan(0);
    expect(Math.abs(next.waitMs - late.waitMs)).toBeLessThan(50);
  });

  it("keeps its key only while some time in it lies ahead (plus a second)", async () => {
    const k = key();
    await limiter.take(k, { rate: 2, mode: "new" });
    await limiter.take(k, { rate: 2, mode: "new" });
    const ttl = await redis.pttl(k);
    // The next token and the turn booked for it are ~500 ms ahead: kept ~1.5 s.
    expect(ttl).toBeGreaterThan(1400);
    expect(ttl).toBeLessThanOrEqual(1500);
  });

  it("refuses a rate that is not positive", async () => {
    await expect(limiter.take(key(), { rate: 0, mode: "new" })).rejects.toThrow(/positive/);
  });
});

describe("on a Redis Cluster", () => {
  let cluster: RedisClusterUnderTest;
  beforeAll(async () => {
    cluster = await RedisClusterUnderTest.start({ masters: 3 });
  }, 60_000);
  afterAll(async () => {
    await cluster?.close();
  });

  it("limits keys of every slot with the one-key script (no CROSSSLOT), each on its own", async () => {
    const client = createRedis(
      {
        kind: "cluster",
        nodes: cluster.nodes.map((node) => ({ host: "127.0.0.1", port: node.port })),
        tls: undefined,
      },
      "fail-fast",
      silentLogger,
    );
    try {
      await new Promise((resolve) => client.once("ready", resolve));
      const onCluster = createThroughputLimiter(client);
      // Slots 2146, 6442 and 11147: one key on each master of an evenly split cluster.
      const keys = [
        "throughput:sms-sender:SHOP",
        "throughput:sms-sender:+14155550100",
        "throughput:sms-sender:BANK",
      ];
      const results = await Promise.all(keys.map((k) => drain(onCluster, k, 20, 20)));
      for (const { grants } of results) {
        expect(grants).toHaveLength(20);
        expect(busiestWindow(grants, 500)).toBeLessThanOrEqual(12);
      }
    } finally {
      client.disconnect();
    }
  });
});
