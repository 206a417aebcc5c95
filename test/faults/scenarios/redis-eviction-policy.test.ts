import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { RedisServer } from "../support/redis-server.js";
import { FaultScenario } from "../support/scenario.js";

/**
 * Issue 4.7: a Redis that may evict keys (any maxmemory-policy but noeviction) can drop queued
 * jobs under memory pressure; the worker says so clearly at start.
 */
let s: FaultScenario;
let safeRedis: RedisServer;

beforeAll(async () => {
  s = await FaultScenario.start("redis-eviction-policy", { redis: { maxmemoryPolicy: "allkeys-lru" } });
  safeRedis = await RedisServer.start({ maxmemoryPolicy: "noeviction" });
}, 60_000);

afterAll(async () => {
  await s?.close();
  await safeRedis?.kill();
});

interface LogLine {
  level: number;
  msg: string;
  maxmemoryPolicy?: string;
}

function lines(output: string): LogLine[] {
  return output
    .split("\n")
    .filter((line) => line.startsWith("{"))
    .map((line) => JSON.parse(line) as LogLine);
}

describe("given Redis with maxmemory-policy allkeys-lru", () => {
  it("the worker warns at start that queued jobs may be evicted", async () => {
    const worker = await s.startWorker();
    const warning = lines(worker.output()).find((line) => line.maxmemoryPolicy !== undefined);
    expect(warning, worker.output()).toBeDefined();
    expect(warning?.level).toBe(40);
    expect(warning?.maxmemoryPolicy).toBe("allkeys-lru");
    expect(warning?.msg).toContain('maxmemory-policy is "allkeys-lru"');
    expect(warning?.msg).toContain("noeviction");
    await worker.stop("SIGTERM");
    s.record(await s.audit(), "warning logged at start");
  });

  it("and says nothing of the kind with noeviction", async () => {
    const worker = await s.startWorker({ REDIS_URL: safeRedis.url });
    // The check runs before the start-up line, so by now it would have spoken.
    expect(worker.output()).toContain("delivery worker started");
    expect(worker.output()).not.toContain("maxmemory-policy");
    await worker.stop("SIGTERM");
  });
});
