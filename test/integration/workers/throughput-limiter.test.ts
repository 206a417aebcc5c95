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
 * the turn it was given and comes back as `returning`. Resolves with each grant's time (ms) and
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
      for (let mode: LineMode = "new"; ; mode = "returning") {
        const taken = await on.take(limitKey, { rate, mode });
        if (taken.granted) {
          grants.push(performance.now());
          return;
        }
        refused++;
        await sleep(taken.waitMs);
      }
    }),
  );
  return { grants: grants.sort((a, b) => a - b), refused };
}

/** The most grants in any window of `windowMs` starting at a grant. */
function busiestWindow(grants: readonly number[], windowMs: number): number {
  let most = 0;
  let end = 0;
  for (let start = 0; start < grants.length; start++) {
    while (end < grants.length && (grants[end] as number) < (grants[start] as number) + windowMs) end++;
    most = Math.max(most, end - start);
  }
  return most;
}

describe("the throughput limiter's precision", () => {
  it("holds 60 messages arriving at once to 20 a second: at most 21 in any second, most refused once", async () => {
    const { grants, refused } = await drain(limiter, key(), 20, 60);

    expect(grants).toHaveLength(60);
    // rate × 1 s + 1 + tolerance / interval (50 ms / 50 ms): 22 at most by the arithmetic.
    expect(busiestWindow(grants, 1000)).toBeLessThanOrEqual(21);
    // 58 had to wait (a tolerance of one interval lets a second go at once); the line brings
    // them back one per interval, so few are refused twice.
    expect(refused).toBeGreaterThanOrEqual(58);
    expect(refused).toBeLessThan(58 * 1.5);
    // ~3 s: the line keeps the limit busy (nothing like a herd's lost turns).
    expect((grants.at(-1) as number) - (grants[0] as number)).toBeLessThan(3500);
  });
});

describe("the line", () => {
  it("gives the messages refused one after another turns one interval apart, in order", async () => {
    const k = key();
    expect(await limiter.take(k, { rate: 10, mode: "new" })).toEqual({ granted: true });
    const waits: number[] = [];
    for (let i = 0; i < 4; i++) {
      const taken = await limiter.take(k, { rate: 10, mode: "new" });
      if (taken.granted) throw new Error("granted over the limit");
      expect(taken.booked).toBe(true);
      waits.push(taken.waitMs);
    }
    // ~100, 200, 300, 400 ms (less the few ms the calls took).
    waits.forEach((wait, i) => {
      expect(wait).toBeGreaterThan((i + 1) * 100 - 30);
      expect(wait).toBeLessThanOrEqual((i + 1) * 100);
    });
  });

  it("keeps a newcomer behind the line when a token comes free; the message whose turn it is takes it", async () => {
    const k = key();
    await limiter.take(k, { rate: 10, mode: "new" });
    const first = await limiter.take(k, { rate: 10, mode: "new" });
    if (first.granted) throw new Error("granted over the limit");
    await sleep(first.waitMs + 5);

    const newcomer = await limiter.take(k, { rate: 10, mode: "new" });
    expect(newcomer).toMatchObject({ granted: false, booked: true });
    expect(await limiter.take(k, { rate: 10, mode: "returning" })).toEqual({ granted: true });
  });

  it("sends a returning message that came too early to the end of the line", async () => {
    const k = key();
    await limiter.take(k, { rate: 10, mode: "new" });
    const turns = [];
    for (let i = 0; i < 3; i++) turns.push(await limiter.take(k, { rate: 10, mode: "new" }));
    const early = await limiter.take(k, { rate: 10, mode: "returning" });
    // Behind the three booked turns: ~400 ms.
    expect(early).toMatchObject({ granted: false, booked: true });
    expect(early.granted === false && early.waitMs).toBeGreaterThan(330);
  });

  it("lets an urgent message go before the line: its turn comes ahead of the next ordinary one", async () => {
    const k = key();
    await limiter.take(k, { rate: 10, mode: "new" });
    const ordinary = [];
    for (let i = 0; i < 5; i++) ordinary.push(await limiter.take(k, { rate: 10, mode: "new" }));
    const urgent = await limiter.take(k, { rate: 10, mode: "urgent" });
    if (urgent.granted || ordinary[0]?.granted !== false) throw new Error("granted over the limit");
    // The next token, up to the tolerance (50 ms) early: before the first ordinary turn.
    expect(urgent.waitMs).toBeLessThan(ordinary[0].waitMs);
    await sleep(urgent.waitMs);
    expect(await limiter.take(k, { rate: 10, mode: "returning" })).toEqual({ granted: true });
  });

  it("books no turn past the deadline: the next message is given the same one", async () => {
    const k = key();
    await limiter.take(k, { rate: 1, mode: "new" });
    const late = await limiter.take(k, { rate: 1, mode: "new", deadlineMs: 500 });
    expect(late).toMatchObject({ granted: false, booked: false });
    const next = await limiter.take(k, { rate: 1, mode: "new" });
    expect(next).toMatchObject({ granted: false, booked: true });
    if (late.granted || next.granted) throw new Error("unreachable");
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
