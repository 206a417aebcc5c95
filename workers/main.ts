import { Worker } from "bullmq";
import { createDatabase } from "../db/client.js";
import { coalesceWrites } from "../src/coalesce-writes.js";
import { loadConfig } from "../src/config.js";
import { createLogger } from "../src/logger.js";
import { createDeliveryQueue, DELIVERY_QUEUE, type DeliveryJobData } from "../src/messages/delivery-queue.js";
import { startOutboxRelay } from "../src/messages/outbox-relay.js";
import { createMetrics } from "../src/observability/metrics.js";
import { onShutdown, runProcess } from "../src/process.js";
import { createRedis } from "../src/redis.js";
import { renderSandbox } from "../src/templates/sandbox.js";
import { DatabaseGate } from "./database-gate.js";
import { createDeliveryProcessor } from "./deliver.js";
import { pruneIdempotencyKeys } from "./idempotency-pruner.js";
import { startOpsServer } from "./ops-server.js";
import { every } from "./periodic.js";
import { createProviders } from "./providers/index.js";
import { warnUnlessNoEviction } from "./redis-checks.js";
import { sweep } from "./sweeper.js";

/** How often a worker deletes expired `Idempotency-Key` claims. */
const PRUNE_INTERVAL_MS = 60_000;

async function main(): Promise<void> {
  const config = loadConfig();
  const logger = createLogger({ level: config.LOG_LEVEL, name: "worker" });
  // Fail fast on an unreachable database, like the web process: the gate below waits it out.
  const { db, sql } = createDatabase({
    url: config.DATABASE_URL,
    poolSize: config.DATABASE_POOL_SIZE,
    connectTimeoutSeconds: 2,
  });
  const redis = createRedis(config.REDIS_URL, "worker", logger);
  const queue = createDeliveryQueue(redis, config.QUEUE_PREFIX);
  queue.on("error", (error) => logger.warn({ err: error }, "queue error"));
  await warnUnlessNoEviction(redis, logger);

  const metrics = createMetrics({ process: "worker", queue, db });
  const ops =
    config.WORKER_METRICS_PORT > 0
      ? startOpsServer({ db, queue, metrics, logger, port: config.WORKER_METRICS_PORT })
      : undefined;

  const workerRedis = createRedis(config.REDIS_URL, "worker", logger);
  // Commands of concurrent jobs (and the relay's) leave in one socket write per loop turn.
  coalesceWrites(redis);
  coalesceWrites(workerRedis);
  // While Postgres is unreachable the worker takes no jobs (paused) and burns no attempts.
  let worker: Worker<DeliveryJobData> | undefined;
  const database = new DatabaseGate({
    probe: () => sql`select 1`,
    probeIntervalMs: config.DATABASE_PROBE_INTERVAL_MS,
    logger,
    onUnavailable: () =>
      void worker?.pause(true).catch((error: unknown) => logger.warn({ err: error }, "could not pause")),
    onAvailable: () => worker?.resume(),
  });
  const providers = createProviders(config);
  const processor = createDeliveryProcessor({
    db,
    providers,
    policy: {
      maxAttempts: config.MAX_DELIVERY_ATTEMPTS,
      baseDelayMs: config.RETRY_BASE_DELAY_MS,
      maxDelayMs: config.RETRY_MAX_DELAY_MS,
    },
    logger,
    now: () => new Date(),
    random: Math.random,
    metrics,
    database,
  });
  worker = new Worker<DeliveryJobData>(DELIVERY_QUEUE, processor, {
    connection: workerRedis,
    prefix: config.QUEUE_PREFIX,
    concurrency: config.WORKER_CONCURRENCY,
    // A stalled job (its worker died) is safe to run again: the events say where it got to.
    maxStalledCount: 10,
    lockDuration: config.WORKER_LOCK_DURATION_MS,
    stalledInterval: config.WORKER_STALLED_INTERVAL_MS,
  });
  worker.on("error", (error) => logger.error({ err: error }, "worker error"));
  worker.on("failed", (job, error) =>
    logger.warn({ err: error, messageId: job?.data.messageId }, "delivery job failed"),
  );

  const databaseUp = () => database.available;
  const sweeper = every(config.SWEEP_INTERVAL_MS, databaseUp, () =>
    sweep({ db, queue, now: () => new Date(), graceMs: config.SWEEP_GRACE_MS })
      .then((count) => count > 0 && logger.info({ count }, "sweeper re-enqueued messages without a job"))
      .catch((error: unknown) => logger.warn({ err: error }, "sweep failed")),
  );
  const pruner = every(PRUNE_INTERVAL_MS, databaseUp, () =>
    pruneIdempotencyKeys(sql, { now: new Date() })
      .then((count) => count > 0 && logger.info({ count }, "deleted expired idempotency keys"))
      .catch((error: unknown) => logger.warn({ err: error }, "idempotency key pruning failed")),
  );

  // Moves accepted messages from the delivery outbox into the queue (the API never talks to Redis).
  const relay = startOutboxRelay({ db, queue, logger });

  logger.info(
    {
      concurrency: config.WORKER_CONCURRENCY,
      providers: { sms: config.SMS_PROVIDER, email: config.EMAIL_PROVIDER, push: config.PUSH_PROVIDER },
    },
    "delivery worker started",
  );

  onShutdown(logger, config.SHUTDOWN_TIMEOUT_MS, async () => {
    const periodicStopped = Promise.all([sweeper.stop(), pruner.stop()]);
    database.close();
    await ops?.close();
    await worker.close();
    // After the jobs: any render they still wait for finishes first.
    await renderSandbox.close();
    await periodicStopped;
    await relay.stop();
    await providers.email.close?.();
    await queue.close();
    redis.disconnect();
    workerRedis.disconnect();
    await sql.end({ timeout: 5 });
  });
}

runProcess(main);
