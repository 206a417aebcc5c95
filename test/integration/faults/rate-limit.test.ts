import { Queue } from "bullmq";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createApp } from "../../../src/api/app.js";
import { DELIVERY_QUEUE, type DeliveryJobData } from "../../../src/store/delivery-queue.js";
import { RedisServer } from "../../faults/support/redis-server.js";
import { createHarness, eventually, onboard } from "../../support/harness.js";

/**
 * Per-organization rate limit of sends (SEND_RATE_LIMIT a second, bursts of SEND_RATE_BURST):
 * a token bucket in Redis shared by every web process, an in-memory limit per process while
 * that Redis is unreachable or hung, 429 `{ error }` with Retry-After past it.
 */
const LIMITS = { SEND_RATE_LIMIT: "2", SEND_RATE_BURST: "5", SEND_DAILY_QUOTA: "0" };
const h = createHarness(LIMITS);
/** A second web process on the same Redis and prefix: the same buckets. */
const sibling = createHarness({ ...LIMITS, QUEUE_PREFIX: h.config.QUEUE_PREFIX });
/** An operator who turns the limit off. */
const unlimited = createHarness({ SEND_RATE_LIMIT: "0" });
/** A limit without SEND_RATE_BURST: the bucket holds two seconds' worth. */
const burstUnset = createHarness({ SEND_RATE_LIMIT: "3" });

function send(app: { request: typeof h.app.request }, apiKey: string, query = "?dry_run=true") {
  return app.request(`/api/v1/notifications/sms${query}`, {
    method: "POST",
    headers: { "content-type": "application/json", "x-api-key": apiKey },
    body: JSON.stringify({ payload: { to: "+14155550100", body: "rate" } }),
  });
}

/** `count` sends at once; how many passed, and how long they took (the bucket refills meanwhile). */
async function concurrently(app: { request: typeof h.app.request }, apiKey: string, count: number) {
  const started = Date.now();
  const results = await Promise.all(Array.from({ length: count }, () => send(app, apiKey)));
  const refused = results.filter((r) => r.status === 429);
  for (const r of refused) expect(Number(r.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);
  expect(refused.length + results.filter((r) => r.status === 200).length).toBe(count);
  return { passed: count - refused.length, elapsedMs: Date.now() - started };
}

/** At 2 tokens a second, at most this many more can have come back during `elapsedMs`. */
const refilledDuring = (elapsedMs: number) => Math.floor(elapsedMs / 500);

async function statuses(app: { request: typeof h.app.request }, apiKey: string, count: number) {
  const result: number[] = [];
  for (let i = 0; i < count; i++) result.push((await send(app, apiKey)).status);
  return result;
}

afterAll(async () => {
  await Promise.all([h.close(), sibling.close(), unlimited.close(), burstUnset.close()]);
});

describe("the send rate limit", () => {
  it("refuses an organization past its burst with 429, Retry-After and a JSON error", async () => {
    const { apiKey } = await onboard(h);
    expect(await statuses(h.app, apiKey, 5)).toEqual([200, 200, 200, 200, 200]);
    const refused = await send(h.app, apiKey);
    expect(refused.status).toBe(429);
    expect(Number(refused.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);
    const body = (await refused.json()) as Record<string, unknown>;
    expect(Object.keys(body)).toEqual(["error"]);
    expect(body.error).toMatch(/Too many requests/);
    // Real sends count the same as dry runs, and a refused one stores nothing.
    expect((await send(h.app, apiKey, "")).status).toBe(429);
  });

  it("refills at SEND_RATE_LIMIT a second", async () => {
    const { apiKey } = await onboard(h);
    await statuses(h.app, apiKey, 6);
    const started = Date.now();
    await eventually(
      async () => ((await send(h.app, apiKey)).status === 200 ? true : undefined),
      3000,
      "a token",
    );
    // 2 a second: the next token is at most ~500 ms away.
    expect(Date.now() - started).toBeLessThan(1500);
  });

  it("answers sends that arrive together as if they came one by one: the burst passes, the rest get 429", async () => {
    const { apiKey } = await onboard(h);
    // One send first, so the key is cached and the 12 reach the limiter in the same turn.
    const started = Date.now();
    expect((await send(h.app, apiKey)).status).toBe(200);
    const { passed } = await concurrently(h.app, apiKey, 12);
    expect(passed).toBeGreaterThanOrEqual(4);
    expect(passed).toBeLessThanOrEqual(4 + refilledDuring(Date.now() - started));
  });

  it("grants what is left of a part-used bucket to concurrent sends", async () => {
    const { apiKey } = await onboard(h);
    const started = Date.now();
    expect(await statuses(h.app, apiKey, 3)).toEqual([200, 200, 200]);
    const { passed } = await concurrently(h.app, apiKey, 6);
    expect(passed).toBeGreaterThanOrEqual(2);
    expect(passed).toBeLessThanOrEqual(2 + refilledDuring(Date.now() - started));
  });

  it("leaves other organizations alone", async () => {
    const noisy = await onboard(h);
    const quiet = await onboard(h);
    await statuses(h.app, noisy.apiKey, 8);
    expect((await send(h.app, noisy.apiKey)).status).toBe(429);
    expect(await statuses(h.app, quiet.apiKey, 5)).toEqual([200, 200, 200, 200, 200]);
  });

  it("is one bucket across web processes (it lives in Redis)", async () => {
    const { apiKey } = await onboard(h);
    expect(await statuses(h.app, apiKey, 3)).toEqual([200, 200, 200]);
    expect(await statuses(sibling.app, apiKey, 3)).toEqual([200, 200, 429]);
  });

  it("comes after authentication and only on POST: 401 and 404 are unchanged", async () => {
    expect((await send(h.app, `ntf_${"x".repeat(43)}`)).status).toBe(401);
    const { apiKey } = await onboard(h);
    const get = await h.app.request("/api/v1/notifications/sms", { headers: { "x-api-key": apiKey } });
    expect(get.status).toBe(404);
  });

  it("is off when SEND_RATE_LIMIT=0", async () => {
    expect(unlimited.config.SEND_RATE_LIMIT).toBe(0);
    const { apiKey } = await onboard(unlimited);
    const results = await statuses(unlimited.app, apiKey, 30);
    expect(results.every((status) => status === 200)).toBe(true);
  });

  it("holds twice SEND_RATE_LIMIT when SEND_RATE_BURST is unset", async () => {
    const { apiKey } = await onboard(burstUnset);
    const { passed, elapsedMs } = await concurrently(burstUnset.app, apiKey, 12);
    // 6 at once, plus what 3 tokens a second brought back meanwhile.
    expect(passed).toBeGreaterThanOrEqual(6);
    expect(passed).toBeLessThanOrEqual(6 + Math.floor((elapsedMs * 3) / 1000));
  });
});

describe("the send rate limit without its Redis", () => {
  let hung: RedisServer;
  let hungRedis: Redis;
  const deadRedis = new Redis("redis://127.0.0.1:1", {
    enableOfflineQueue: false,
    maxRetriesPerRequest: 1,
    lazyConnect: true,
    retryStrategy: () => null,
  });
  deadRedis.on("error", () => {});
  const queues: Queue<DeliveryJobData>[] = [];
  const appOn = (connection: Redis) => {
    const queue = new Queue<DeliveryJobData>(DELIVERY_QUEUE, { connection, prefix: h.config.QUEUE_PREFIX });
    queue.on("error", () => {});
    queues.push(queue);
    return createApp({ ...h.deps, queue });
  };

  beforeAll(async () => {
    hung = await RedisServer.start();
    hungRedis = new Redis(hung.url, {
      enableOfflineQueue: false,
      maxRetriesPerRequest: 1,
      lazyConnect: true,
    });
    hungRedis.on("error", () => {});
    await hungRedis.connect();
  });

  afterAll(async () => {
    hung.thaw();
    await Promise.all(queues.map((queue) => queue.close().catch(() => {})));
    hungRedis.disconnect();
    deadRedis.disconnect();
    await hung.kill();
  });

  it("still limits each organization when Redis is unreachable (in-memory insurance)", async () => {
    const app = appOn(deadRedis);
    const { apiKey } = await onboard(h);
    const other = await onboard(h);
    expect(await statuses(app, apiKey, 5)).toEqual([200, 200, 200, 200, 200]);
    expect((await send(app, apiKey)).status).toBe(429);
    expect((await send(app, other.apiKey)).status).toBe(200);
  });

  it("still limits concurrent sends without Redis", async () => {
    const app = appOn(deadRedis);
    const { apiKey } = await onboard(h);
    // The in-memory limit is a fixed window of 5 per 2.5 s: nothing comes back within it.
    expect((await concurrently(app, apiKey, 9)).passed).toBe(5);
  });

  it("still limits, without hanging, when Redis stops answering", async () => {
    const app = appOn(hungRedis);
    const { apiKey } = await onboard(h);
    hung.freeze();
    const started = Date.now();
    const results = await statuses(app, apiKey, 6);
    expect(results).toEqual([200, 200, 200, 200, 200, 429]);
    // Each request waits the limiter's 250 ms Redis time-out at most.
    expect(Date.now() - started).toBeLessThan(6 * 600);
    hung.thaw();
  });
});
