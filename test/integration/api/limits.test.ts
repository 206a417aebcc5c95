import { Queue } from "bullmq";
import { Redis } from "ioredis";
import { afterAll, describe, expect, it } from "vitest";
import { createApp } from "../../../src/api/app.js";
import { loadConfig } from "../../../src/runtime/config.js";
import { DELIVERY_QUEUE, type DeliveryJobData } from "../../../src/store/delivery-queue.js";
import { RedisServer } from "../../faults/support/redis-server.js";
import {
  countMessages,
  createHarness,
  createTemplate,
  expectError,
  onboard,
  unreachableQueue,
} from "../../support/harness.js";

/**
 * The per-organization limits on by default (decision 0032): the send rate, the daily quota of
 * accepted messages (shared through Redis by every web process, reset at UTC midnight) and the
 * preview rate; 429 with `Retry-After`, and the draft's RateLimit fields on every limited answer.
 */
const QUOTA = { SEND_DAILY_QUOTA: "3" };
const h = createHarness(QUOTA);
/** Another web process on the same Redis and prefix: the same counters. */
const sibling = createHarness({ ...QUOTA, QUEUE_PREFIX: h.config.QUEUE_PREFIX });
const previews = createHarness({ TEMPLATE_PREVIEW_RATE_LIMIT: "1", TEMPLATE_PREVIEW_RATE_BURST: "2" });
/** What a deployment that sets none of the limits gets. */
const defaults = loadConfig({ NODE_ENV: "test" });
const unreachable = unreachableQueue(h.config.QUEUE_PREFIX);

afterAll(async () => {
  await Promise.all([h.close(), sibling.close(), previews.close(), unreachable.close()]);
});

type App = { request: typeof h.app.request };
const sms = { payload: { to: "+14155550100", body: "limits" } };

function send(
  app: App,
  apiKey: string,
  options: { query?: string; headers?: Record<string, string>; body?: unknown } = {},
) {
  return app.request(`/api/v1/notifications/sms${options.query ?? ""}`, {
    method: "POST",
    headers: { "content-type": "application/json", "x-api-key": apiKey, ...options.headers },
    body: JSON.stringify(options.body ?? sms),
  });
}

function rateLimitFields(response: Response) {
  return {
    limit: response.headers.get("ratelimit-limit"),
    remaining: response.headers.get("ratelimit-remaining"),
    reset: response.headers.get("ratelimit-reset"),
    policy: response.headers.get("ratelimit-policy"),
  };
}

/** A clock the test moves. */
function clock(iso: string) {
  let now = new Date(iso).getTime();
  return {
    now: () => new Date(now),
    set(at: string) {
      now = new Date(at).getTime();
    },
  };
}

describe("the limits' defaults", () => {
  it("given no settings, then sends, the daily quota and previews are limited", () => {
    expect(defaults.SEND_RATE_LIMIT).toBe(100);
    expect(defaults.SEND_RATE_BURST).toBeUndefined(); // twice the rate: 200
    expect(defaults.SEND_DAILY_QUOTA).toBe(100_000);
    expect(defaults.TEMPLATE_PREVIEW_RATE_LIMIT).toBe(10);
    expect(defaults.TEMPLATE_PREVIEW_RATE_BURST).toBeUndefined();
  });

  it("given the default limits, when an organization sends 230 at once, then 200 pass and the rest get 429 with Retry-After and the RateLimit fields", async () => {
    const app = createApp({
      ...h.deps,
      config: {
        ...h.config,
        SEND_RATE_LIMIT: defaults.SEND_RATE_LIMIT,
        SEND_RATE_BURST: defaults.SEND_RATE_BURST,
        SEND_DAILY_QUOTA: defaults.SEND_DAILY_QUOTA,
      },
    });
    const { apiKey } = await onboard(h);
    expect((await send(app, apiKey, { query: "?dry_run=true" })).status).toBe(200); // the key is cached
    const answers = await Promise.all(
      Array.from({ length: 230 }, () => send(app, apiKey, { query: "?dry_run=true" })),
    );
    const passed = answers.filter((r) => r.status === 200);
    const refused = answers.filter((r) => r.status === 429);
    expect(passed.length + refused.length).toBe(230);
    // 199 tokens were left; at 100 a second a few more may have come back meanwhile.
    expect(passed.length).toBeGreaterThanOrEqual(199);
    expect(passed.length).toBeLessThan(215);
    const [first] = refused;
    if (!first) throw new Error("nothing refused");
    await expectError(
      first,
      429,
      /Too many requests: this organization may send 100 messages a second \(bursts of 200\)/,
    );
    expect(Number(first.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);
    expect(rateLimitFields(first)).toEqual({
      limit: "200",
      remaining: "0",
      reset: first.headers.get("retry-after"),
      policy: "200;w=2",
    });
    // A passed one speaks for the rate (far closer to exhaustion than the day's 100,000) and lists both.
    const last = passed.at(-1) as Response;
    expect(rateLimitFields(last)).toMatchObject({ limit: "200", policy: "200;w=2, 100000;w=86400" });
    expect(Number(last.headers.get("ratelimit-remaining"))).toBeLessThan(20);
  });
});

describe("the daily quota", () => {
  it("given a quota of 3, when an organization sends a fourth message, then 429 until the next UTC midnight, and nothing is stored", async () => {
    const time = clock("2026-11-24T23:00:00.000Z");
    const app = createApp({ ...h.deps, now: time.now });
    const org = await onboard(h);
    const remaining = [];
    for (let i = 0; i < 3; i++) {
      const accepted = await send(app, org.apiKey);
      expect(accepted.status).toBe(202);
      remaining.push(accepted.headers.get("ratelimit-remaining"));
      expect(accepted.headers.get("ratelimit-limit")).toBe("3");
      expect(accepted.headers.get("ratelimit-reset")).toBe("3600");
    }
    expect(remaining).toEqual(["2", "1", "0"]);

    const refused = await send(app, org.apiKey);
    await expectError(
      refused,
      429,
      /^Daily quota reached: this organization may send 3 messages per UTC day; it resets at 2026-11-25T00:00:00.000Z \(retry in 3600 s\)$/,
    );
    expect(refused.headers.get("retry-after")).toBe("3600");
    expect(rateLimitFields(refused)).toMatchObject({ limit: "3", remaining: "0", reset: "3600" });
    expect(await countMessages(h, org.id)).toBe(3);
  });

  it("given an organization at its quota, then another organization still sends", async () => {
    const noisy = await onboard(h);
    const quiet = await onboard(h);
    for (let i = 0; i < 3; i++) expect((await send(h.app, noisy.apiKey)).status).toBe(202);
    expect((await send(h.app, noisy.apiKey)).status).toBe(429);
    expect((await send(h.app, quiet.apiKey)).status).toBe(202);
  });

  it("is one count across web processes (it lives in Redis)", async () => {
    const { apiKey } = await onboard(h);
    expect((await send(h.app, apiKey)).status).toBe(202);
    expect((await send(sibling.app, apiKey)).status).toBe(202);
    expect((await send(h.app, apiKey)).status).toBe(202);
    expect((await send(sibling.app, apiKey)).status).toBe(429);
    expect((await send(h.app, apiKey)).status).toBe(429);
  });

  it("counts concurrent sends of both processes exactly", async () => {
    const { apiKey } = await onboard(h);
    const answers = await Promise.all(
      Array.from({ length: 10 }, (_, i) => send(i % 2 === 0 ? h.app : sibling.app, apiKey)),
    );
    expect(answers.filter((r) => r.status === 202)).toHaveLength(3);
    expect(answers.filter((r) => r.status === 429)).toHaveLength(7);
  });

  it("resets when the UTC day rolls over", async () => {
    const time = clock("2026-11-24T23:59:59.500Z");
    const app = createApp({ ...h.deps, now: time.now });
    const { apiKey } = await onboard(h);
    for (let i = 0; i < 3; i++) expect((await send(app, apiKey)).status).toBe(202);
    const refused = await send(app, apiKey);
    expect(refused.status).toBe(429);
    expect(refused.headers.get("retry-after")).toBe("1");
    time.set("2026-11-25T00:00:00.000Z");
    const nextDay = await send(app, apiKey);
    expect(nextDay.status).toBe(202);
    expect(rateLimitFields(nextDay)).toMatchObject({ limit: "3", remaining: "2", reset: "86400" });
  });

  it("given a day's count under the counter's name before the {limits} tag (an upgrade mid-day), then the day goes on from it", async () => {
    const time = clock("2026-11-24T12:00:00.000Z");
    const app = createApp({ ...h.deps, now: time.now });
    const { id, apiKey } = await onboard(h);
    const prefix = h.config.QUEUE_PREFIX;
    await h.redis.set(`${prefix}:quota:send:${id}:2026-11-24`, "2", "PX", 60_000);
    const last = await send(app, apiKey);
    expect(last.status).toBe(202);
    expect(last.headers.get("ratelimit-remaining")).toBe("0");
    expect((await send(app, apiKey)).status).toBe(429);
    expect(await h.redis.get(`${prefix}:{limits}:quota:send:${id}:2026-11-24`)).toBe("3");
    expect(await h.redis.pttl(`${prefix}:{limits}:quota:send:${id}:2026-11-24`)).toBeGreaterThan(43_200_000);
    // Another process reads the old name too, but the counter exists: it counts on from there.
    expect((await send(createApp({ ...sibling.deps, now: time.now }), apiKey)).status).toBe(429);
  });

  it("does not count dry runs, replays of an Idempotency-Key, or refused requests", async () => {
    const org = await onboard(h);
    const idempotent = { headers: { "Idempotency-Key": "once" } };
    expect((await send(h.app, org.apiKey, idempotent)).status).toBe(202);
    const replay = await send(h.app, org.apiKey, idempotent);
    expect(replay.status).toBe(202);
    expect(replay.headers.get("idempotent-replayed")).toBe("true");
    expect(replay.headers.get("ratelimit-remaining")).toBe("2");
    const dryRun = await send(h.app, org.apiKey, { query: "?dry_run=true" });
    expect(dryRun.status).toBe(200);
    expect(dryRun.headers.get("ratelimit-remaining")).toBe("2");
    expect((await send(h.app, org.apiKey, { body: { payload: { to: "nope", body: "x" } } })).status).toBe(
      400,
    );
    expect(
      (
        await send(h.app, org.apiKey, {
          headers: { "Idempotency-Key": "once" },
          body: { payload: { to: "+14155550100", body: "other" } },
        })
      ).status,
    ).toBe(422);
    // Two more fit: the first message was the only one counted.
    expect((await send(h.app, org.apiKey)).status).toBe(202);
    expect((await send(h.app, org.apiKey)).status).toBe(202);
    expect((await send(h.app, org.apiKey)).status).toBe(429);
    // A dry run tells whether a send would pass now.
    expect((await send(h.app, org.apiKey, { query: "?dry_run=true" })).status).toBe(429);
    expect(await countMessages(h, org.id)).toBe(3);
  });

  it("given Redis unreachable, then sends are accepted uncounted (fail open) and stay in the outbox", async () => {
    const app = createApp({ ...h.deps, queue: unreachable.queue });
    const org = await onboard(h);
    for (let i = 0; i < 5; i++) expect((await send(app, org.apiKey)).status).toBe(202);
    expect(await countMessages(h, org.id)).toBe(5);
  });

  it("given Redis that stops answering, then one send waits its 250 ms and the next ones go uncounted at once", async () => {
    const hung = await RedisServer.start();
    const redis = new Redis(hung.url, {
      enableOfflineQueue: false,
      maxRetriesPerRequest: 1,
      lazyConnect: true,
    });
    redis.on("error", () => {});
    await redis.connect();
    const queue = new Queue<DeliveryJobData>(DELIVERY_QUEUE, {
      connection: redis,
      prefix: h.config.QUEUE_PREFIX,
    });
    queue.on("error", () => {});
    try {
      // The rate limit off: its own 250 ms wait is the rate-limit tests' business.
      const app = createApp({ ...h.deps, queue, config: { ...h.config, SEND_RATE_LIMIT: 0 } });
      const org = await onboard(h);
      expect((await send(app, org.apiKey)).headers.get("ratelimit-remaining")).toBe("2");
      hung.freeze();
      const started = Date.now();
      for (let i = 0; i < 5; i++) expect((await send(app, org.apiKey)).status).toBe(202);
      expect(Date.now() - started).toBeLessThan(250 + 400);
      expect(await countMessages(h, org.id)).toBe(6);
    } finally {
      hung.thaw();
      await queue.close().catch(() => {});
      redis.disconnect();
      await hung.kill();
    }
  });
});

describe("a retry of an accepted send (its Idempotency-Key held) gets its replay, not a 429", () => {
  it("given the daily quota reached, when the first send's key is retried, then 202 replayed; a new key still gets 429", async () => {
    const org = await onboard(h);
    const first = await send(h.app, org.apiKey, { headers: { "Idempotency-Key": "lost-answer" } });
    expect(first.status).toBe(202);
    for (let i = 0; i < 2; i++) expect((await send(h.app, org.apiKey)).status).toBe(202);
    const retry = await send(h.app, org.apiKey, { headers: { "Idempotency-Key": "lost-answer" } });
    expect(retry.status).toBe(202);
    expect(retry.headers.get("idempotent-replayed")).toBe("true");
    expect(await retry.json()).toEqual(await first.json());
    expect((await send(h.app, org.apiKey, { headers: { "Idempotency-Key": "new" } })).status).toBe(429);
    expect(await countMessages(h, org.id)).toBe(3);
  });

  it("given the send rate exhausted, when the first send's key is retried, then 202 replayed; a send without one gets 429", async () => {
    const app = createApp({
      ...h.deps,
      config: { ...h.config, SEND_RATE_LIMIT: 1, SEND_RATE_BURST: 1, SEND_DAILY_QUOTA: 0 },
    });
    const org = await onboard(h);
    const first = await send(app, org.apiKey, { headers: { "Idempotency-Key": "lost-answer" } });
    expect(first.status).toBe(202);
    const retry = await send(app, org.apiKey, { headers: { "Idempotency-Key": "lost-answer" } });
    expect(retry.status).toBe(202);
    expect(retry.headers.get("idempotent-replayed")).toBe("true");
    expect((await send(app, org.apiKey)).status).toBe(429);
    expect((await send(app, org.apiKey, { headers: { "Idempotency-Key": "new" } })).status).toBe(429);
    expect(await countMessages(h, org.id)).toBe(1);
  });
});

describe("what the daily quota counts, decided by the handler", () => {
  it("given an accept that outlives REQUEST_TIMEOUT_MS (503) and then commits, then its unit stays taken", async () => {
    let committed: Promise<unknown> = Promise.resolve();
    const slowStore = {
      ...h.deps.store,
      accept: (pending: Parameters<typeof h.deps.store.accept>[0]) => {
        const result = new Promise<void>((resolve) => setTimeout(resolve, 300)).then(() =>
          h.deps.store.accept(pending),
        );
        committed = result;
        return result;
      },
    };
    const slow = createApp({ ...h.deps, store: slowStore, config: { ...h.config, REQUEST_TIMEOUT_MS: 100 } });
    const org = await onboard(h);
    expect((await send(slow, org.apiKey)).status).toBe(503);
    await committed;
    await new Promise((resolve) => setImmediate(resolve)); // the quota's own bookkeeping, once the handler returns
    expect(await countMessages(h, org.id)).toBe(1);
    const next = await send(h.app, org.apiKey);
    expect(next.status).toBe(202);
    expect(next.headers.get("ratelimit-remaining")).toBe("1");
  });

  /** An app whose limits' Redis the test can freeze (it accepts connections and never answers). */
  async function withHungRedis(
    test: (hung: RedisServer, redis: Redis, app: ReturnType<typeof createApp>) => Promise<void>,
  ) {
    const hung = await RedisServer.start();
    const redis = new Redis(hung.url, {
      enableOfflineQueue: false,
      maxRetriesPerRequest: 1,
      lazyConnect: true,
    });
    redis.on("error", () => {});
    await redis.connect();
    const queue = new Queue<DeliveryJobData>(DELIVERY_QUEUE, {
      connection: redis,
      prefix: h.config.QUEUE_PREFIX,
    });
    queue.on("error", () => {});
    try {
      const time = clock("2026-11-24T12:00:00.000Z");
      await test(
        hung,
        redis,
        createApp({ ...h.deps, queue, now: time.now, config: { ...h.config, SEND_RATE_LIMIT: 0 } }),
      );
    } finally {
      hung.thaw();
      await queue.close().catch(() => {});
      redis.disconnect();
      await hung.kill();
    }
  }

  it("given Redis that answers a take only after its 250 ms, then a request that accepted nothing gives the late unit back", async () => {
    await withHungRedis(async (hung, redis, app) => {
      const org = await onboard(h);
      const key = `${h.config.QUEUE_PREFIX}:{limits}:quota:send:${org.id}:2026-11-24`;
      expect((await send(app, org.apiKey)).status).toBe(202);
      expect(await redis.get(key)).toBe("1");
      hung.freeze();
      // A dry run accepts nothing: it goes on uncounted after 250 ms, while its take waits in Redis.
      expect((await send(app, org.apiKey, { query: "?dry_run=true" })).status).toBe(200);
      hung.thaw();
      await redis.ping(); // answered after the late take and whatever followed it on this connection
      expect(await redis.get(key)).toBe("1");
    });
  });

  it("given Redis that answers the read of the counter's old name only after its 250 ms, then no take follows it late", async () => {
    await withHungRedis(async (hung, redis, app) => {
      const org = await onboard(h);
      const key = `${h.config.QUEUE_PREFIX}:{limits}:quota:send:${org.id}:2026-11-24`;
      hung.freeze();
      // The organization's first take of the day reads the old name first: it goes on uncounted.
      expect((await send(app, org.apiKey, { query: "?dry_run=true" })).status).toBe(200);
      hung.thaw();
      // Round trips enough for whatever the read's late answer would set off to have reached Redis.
      for (let i = 0; i < 5; i++) await redis.ping();
      expect(await redis.exists(key)).toBe(0);
    });
  });
});

describe("the preview rate limit", () => {
  const render = (app: App, apiKey: string) =>
    app.request("/api/v1/templates/hello/render", {
      method: "POST",
      headers: { "content-type": "application/json", "x-api-key": apiKey },
      body: JSON.stringify({ global_merge_vars: [{ name: "NAME", content: "Ada" }] }),
    });

  it("given 1 a second with bursts of 2, when an organization previews three times at once, then the third gets 429; other organizations and sends are untouched", async () => {
    const noisy = await onboard(previews);
    const quiet = await onboard(previews);
    for (const org of [noisy, quiet])
      await createTemplate(previews, org.apiKey, { name: "hello", code: "<p>Hi *|NAME|*</p>" });

    const first = await render(previews.app, noisy.apiKey);
    expect(first.status).toBe(200);
    expect(rateLimitFields(first)).toMatchObject({ limit: "2", remaining: "1", policy: "2;w=2" });
    expect((await render(previews.app, noisy.apiKey)).status).toBe(200);
    const refused = await render(previews.app, noisy.apiKey);
    await expectError(refused, 429, /this organization may preview 1 templates a second \(bursts of 2\)/);
    expect(Number(refused.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);
    expect(rateLimitFields(refused)).toMatchObject({ limit: "2", remaining: "0" });

    expect((await render(previews.app, quiet.apiKey)).status).toBe(200);
    expect((await send(previews.app, noisy.apiKey)).status).toBe(202);
  });

  it("leaves the other template routes unlimited", async () => {
    const org = await onboard(previews);
    await createTemplate(previews, org.apiKey, { name: "hello", code: "<p>Hi</p>" });
    for (let i = 0; i < 4; i++) {
      const read = await previews.app.request("/api/v1/templates/hello", {
        headers: { "x-api-key": org.apiKey },
      });
      expect(read.status).toBe(200);
      expect(read.headers.get("ratelimit-limit")).toBeNull();
    }
  });
});

describe("the OpenAPI document", () => {
  it("describes the 429 and the RateLimit fields of every limited route", async () => {
    const document = (await (await h.app.request("/openapi.json")).json()) as {
      paths: Record<
        string,
        Record<string, { responses: Record<string, { headers?: Record<string, unknown> }> }>
      >;
    };
    for (const path of [
      "/api/v1/notifications/sms",
      "/api/v1/notifications/email",
      "/api/v1/templates/{name}/render",
    ]) {
      const responses = document.paths[path]?.post?.responses ?? {};
      expect(Object.keys(responses["429"]?.headers ?? {}).sort()).toEqual(
        [
          "RateLimit-Limit",
          "RateLimit-Policy",
          "RateLimit-Remaining",
          "RateLimit-Reset",
          "Retry-After",
        ].sort(),
      );
      const success = responses["202"] ?? responses["200"];
      expect(Object.keys(success?.headers ?? {})).toEqual(expect.arrayContaining(["RateLimit-Remaining"]));
      expect(responses["401"]?.headers).toBeUndefined();
    }
  });
});
