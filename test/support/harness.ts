import { randomUUID } from "node:crypto";
import { Queue, Worker } from "bullmq";
import { eq, sql } from "drizzle-orm";
import { Redis } from "ioredis";
import pino from "pino";
import type postgres from "postgres";
import { v7 as uuidv7 } from "uuid";
import { expect, inject } from "vitest";
import { createDatabase, type Database } from "../../db/client.js";
import { messages } from "../../db/schema.js";
import { messageStoreFor, verifiedSendersFor, webhookDepsFor } from "../../src/api/api-process.js";
import { createApp } from "../../src/api/app.js";
import { SimulatorEmailProvider } from "../../src/channels/email/providers/simulator.js";
import * as templateStore from "../../src/channels/email/templates/store.js";
import type { Providers } from "../../src/channels/index.js";
import { SimulatorPushProvider } from "../../src/channels/push/providers/simulator.js";
import { SimulatorSmsProvider } from "../../src/channels/sms/providers/simulator.js";
import { createMetrics, type Metrics } from "../../src/observability/metrics.js";
import { type Config, loadConfig } from "../../src/runtime/config.js";
import { systemTxtResolver } from "../../src/runtime/dns.js";
import { createRedis } from "../../src/runtime/redis.js";
import { DELIVERY_QUEUE, type DeliveryJobData, DeliveryQueues } from "../../src/store/delivery-queue.js";
import { createDeliveryProcessor } from "../../workers/deliver.js";
import { createDeliveryStore } from "../../workers/delivery-store.js";
import { type OutboxRelay, relayOutboxOnce, startOutboxRelay } from "../../workers/outbox-relay.js";
import { startScheduledSends } from "../../workers/scheduled-sends.js";
import { createThroughputLimiter } from "../../workers/throughput-limiter.js";
import { createThroughputLimits } from "../../workers/throughput-limits.js";
import type { WebhookHandoff } from "../../workers/webhook-dispatcher.js";
import { TEST_CONTENT_KEYS } from "./content-keys.js";
import { GENEROUS_LIMITS } from "./limits.js";

export const silentLogger = pino({ level: "silent" });

/** Every channel's simulator (rate-limited cases ask for 50 ms), with some replaced. */
export function simulatorProviders(overrides: Partial<Providers> = {}): Providers {
  const options = { rateLimitRetryAfterMs: 50 };
  return {
    sms: new SimulatorSmsProvider(options),
    email: new SimulatorEmailProvider(options),
    push: new SimulatorPushProvider(options),
    ...overrides,
  };
}

/**
 * The real stack in-process, isolated: this run's database, and a BullMQ prefix of its own so
 * no other test file's worker takes its jobs. Redis: the machine's, unless `env` names a cluster
 * (`REDIS_CLUSTER_NODES`) or Sentinels (`REDIS_SENTINELS`).
 */
export function createHarness(env: Record<string, string> = {}) {
  const otherRedis = Boolean(env.REDIS_CLUSTER_NODES || env.REDIS_SENTINELS);
  const config: Config = loadConfig({
    NODE_ENV: "test",
    DATABASE_URL: inject("databaseUrl"),
    ...(otherRedis ? {} : { REDIS_URL: process.env.REDIS_URL ?? "redis://127.0.0.1:6379" }),
    QUEUE_PREFIX: `test-${randomUUID().slice(0, 8)}`,
    RETRY_BASE_DELAY_MS: "20",
    ...GENEROUS_LIMITS,
    ...TEST_CONTENT_KEYS,
    ...env,
  });
  const { db, sql } = createDatabase({ url: config.DATABASE_URL, poolSize: 10 });
  const redis = createRedis(config.REDIS, "patient", silentLogger);
  const queues = DeliveryQueues.create(redis, config.QUEUE_PREFIX, config.QUEUE_SHARDS);
  const queue = queues.first;
  const metrics = createMetrics({ process: "web", queue: queues, db });
  // Made as the processes make them: one message store for the app, one delivery store for its workers.
  const store = messageStoreFor(config, sql);
  const deliveryStore = createDeliveryStore(sql, store.content);
  const deps = {
    config,
    db,
    store,
    queue,
    queues,
    logger: silentLogger,
    metrics,
    now: () => new Date(),
    newId: uuidv7,
    senders: verifiedSendersFor(config, db, () => new Date()),
    txtResolver: systemTxtResolver({ servers: config.DNS_SERVERS }),
    webhooks: webhookDepsFor(config),
  };
  const app = createApp(deps);
  const workers: Worker[] = [];
  let relay: OutboxRelay | undefined;
  let scheduled: { stop: () => Promise<void> } | undefined;

  return {
    config,
    db,
    sql,
    redis,
    queue,
    queues,
    app,
    deps,
    deliveryStore,
    /** This harness's app deps on another database (one that is down, slow or read-only). */
    depsOn(database: { db: Database; sql: postgres.Sql }) {
      return { ...deps, db: database.db, store: messageStoreFor(config, database.sql) };
    },
    /**
     * Starts an in-process delivery worker on this harness's queue (with shards: one BullMQ
     * Worker per shard consumed) and, like the worker process, the outbox relay that moves
     * accepted messages into the queue and the loop that moves due scheduled sends into the outbox.
     * With `webhooks`, its appends hand their events to that dispatcher's handoff, as the worker
     * process's do.
     */
    startWorker(
      options: {
        providers?: Partial<Providers>;
        concurrency?: number;
        metrics?: Metrics;
        webhooks?: WebhookHandoff;
      } = {},
    ) {
      const processor = createDeliveryProcessor({
        db,
        store: options.webhooks
          ? createDeliveryStore(sql, store.content, silentLogger, options.webhooks)
          : deliveryStore,
        providers: simulatorProviders(options.providers),
        policy: {
          maxAttempts: config.MAX_DELIVERY_ATTEMPTS,
          baseDelayMs: config.RETRY_BASE_DELAY_MS,
          maxDelayMs: config.RETRY_MAX_DELAY_MS,
        },
        logger: silentLogger,
        now: () => new Date(),
        random: Math.random,
        metrics: options.metrics,
        // As the worker process: the limits of this harness's config, shared through its Redis.
        throughput: createThroughputLimits({
          settings: config,
          limiter: createThroughputLimiter(redis),
          holdSlots: Math.max(1, Math.floor((options.concurrency ?? 20) / 10)),
          logger: silentLogger,
          random: Math.random,
        }),
      });
      const started = config.QUEUE_SHARDS_CONSUMED.map((shard) => {
        const worker = new Worker<DeliveryJobData>(queues.all[shard]?.name ?? DELIVERY_QUEUE, processor, {
          connection: createRedis(config.REDIS, "patient", silentLogger),
          prefix: config.QUEUE_PREFIX,
          concurrency: options.concurrency ?? 20,
        });
        worker.on("error", () => {});
        workers.push(worker);
        return worker;
      });
      relay ??= startOutboxRelay({
        sql,
        queue: queues,
        logger: silentLogger,
        waitingLimit: config.QUEUE_WAITING_LIMIT,
      });
      scheduled ??= startScheduledSends({ sql, queuePrefix: config.QUEUE_PREFIX, logger: silentLogger });
      return started[0] as Worker<DeliveryJobData>;
    },
    /** One pass of the outbox relay: adds the jobs of the messages accepted so far. */
    relayOutbox() {
      return relayOutboxOnce({ sql, queue: queues, logger: silentLogger });
    },
    async close() {
      await Promise.all([relay?.stop(), scheduled?.stop()]);
      await Promise.all(
        workers.map(async (w) => {
          await w.close();
          (await w.client).disconnect();
        }),
      );
      await Promise.all(queues.all.map((shard) => shard.obliterate({ force: true }).catch(() => {})));
      await queues.close();
      redis.disconnect();
      await sql.end({ timeout: 5 });
    },
  };
}

export type Harness = ReturnType<typeof createHarness>;

/** A product id no other test uses. */
export function uniqueProduct(): string {
  return `prod-${randomUUID().slice(0, 12)}`;
}

export async function onboard(
  harness: Harness,
  options: { productId?: string; name?: string; active?: boolean } = {},
) {
  const productId = options.productId ?? uniqueProduct();
  const response = await harness.app.request(`/api/v1/onboarding/organizations/${productId}`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({
      organizations: [
        { name: options.name ?? `Org ${randomUUID().slice(0, 8)}`, active: options.active ?? true },
      ],
    }),
  });
  if (response.status !== 201)
    throw new Error(`onboarding failed: ${response.status} ${await response.text()}`);
  const { organizations } = (await response.json()) as {
    organizations: Array<{ id: string; apiKey: string; name: string; product_id: string; active: boolean }>;
  };
  const [organization] = organizations;
  if (!organization) throw new Error("onboarding returned no organization");
  return { ...organization, productId };
}

/** POST /api/v1/notifications/{channel}; a string body is sent as it is. */
export function sendNotification(
  harness: Harness,
  channel: "sms" | "email" | "push",
  apiKey: string,
  body: unknown,
  headers: Record<string, string> = {},
  query = "",
) {
  return harness.app.request(`/api/v1/notifications/${channel}${query}`, {
    method: "POST",
    headers: { "content-type": "application/json", "x-api-key": apiKey, ...headers },
    body: typeof body === "string" ? body : JSON.stringify(body),
  });
}

export function sendSms(
  harness: Harness,
  apiKey: string,
  body: unknown,
  headers: Record<string, string> = {},
  query = "",
) {
  return sendNotification(harness, "sms", apiKey, body, headers, query);
}

/** Stores an e-mail template for the key's organization; throws unless it is created. */
export async function createTemplate(
  harness: Harness,
  apiKey: string,
  template: { name: string; code: string; text?: string },
) {
  const response = await harness.app.request("/api/v1/templates", {
    method: "POST",
    headers: { "content-type": "application/json", "x-api-key": apiKey },
    body: JSON.stringify(template),
  });
  if (response.status !== 201)
    throw new Error(`template not created: ${response.status} ${await response.text()}`);
}

/**
 * Stores a template without the API's save check (decision 0029): one saved before that check
 * existed, or one that renders its sample in time and is slow only with a send's real data.
 */
export async function storeTemplateDirectly(
  harness: Harness,
  organizationId: string,
  template: { name: string; code: string; text?: string },
) {
  const created = await templateStore.createTemplate(
    harness.db,
    organizationId,
    { name: template.name, code: template.code, text: template.text ?? null },
    new Date(),
  );
  if (!created) throw new Error(`template ${template.name} already exists`);
}

export function getMessage(harness: Harness, apiKey: string, messageId: string) {
  return harness.app.request(`/api/v1/messages/${messageId}`, { headers: { "x-api-key": apiKey } });
}

/** How many messages the organization has (a refused request must leave the count as it was). */
export async function countMessages(harness: Harness, organizationId: string): Promise<number> {
  const [row] = await harness.db
    .select({ n: sql<number>`count(*)::int` })
    .from(messages)
    .where(eq(messages.organizationId, organizationId));
  return row?.n ?? 0;
}

/** Asserts an error answer: the status, a JSON `{ "error": string }` and nothing else; returns the message. */
export async function expectError(response: Response, status: number, pattern?: RegExp): Promise<string> {
  expect(response.status).toBe(status);
  expect(response.headers.get("content-type")).toMatch(/application\/json/);
  const body = (await response.json()) as { error: unknown };
  expect(Object.keys(body)).toEqual(["error"]);
  expect(typeof body.error).toBe("string");
  if (pattern) expect(body.error).toMatch(pattern);
  return body.error as string;
}

/** Polls until `check` returns a value, or fails after `timeoutMs`. No fixed sleeps. */
export async function eventually<T>(
  check: () => Promise<T | undefined>,
  timeoutMs = 10_000,
  what = "condition",
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

/** A delivery queue whose Redis is unreachable (nothing listens on port 1): Redis is down. */
export function unreachableQueue(prefix: string) {
  const redis = new Redis("redis://127.0.0.1:1", {
    enableOfflineQueue: false,
    maxRetriesPerRequest: 1,
    lazyConnect: true,
    retryStrategy: () => null,
  });
  redis.on("error", () => {});
  const queue = new Queue<DeliveryJobData>(DELIVERY_QUEUE, { connection: redis, prefix });
  queue.on("error", () => {});
  return {
    queue,
    async close() {
      await queue.close().catch(() => {});
      redis.disconnect();
    },
  };
}
