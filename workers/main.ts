import { Worker } from "bullmq";
import { createDatabase } from "../db/client.js";
import { loadConfig } from "../src/config.js";
import { createLogger } from "../src/logger.js";
import { createDeliveryQueue, DELIVERY_QUEUE, type DeliveryJobData } from "../src/messages/delivery-queue.js";
import { onShutdown, runProcess } from "../src/process.js";
import { createRedis } from "../src/redis.js";
import { createDeliveryProcessor } from "./deliver.js";
import { createSmsProvider } from "./providers/index.js";
import { warnUnlessNoEviction } from "./redis-checks.js";
import { sweep } from "./sweeper.js";

async function main(): Promise<void> {
  const config = loadConfig();
  const logger = createLogger({ level: config.LOG_LEVEL, name: "worker" });
  const { db, sql } = createDatabase({ url: config.DATABASE_URL, poolSize: config.DATABASE_POOL_SIZE });
  const redis = createRedis(config.REDIS_URL, "worker", logger);
  const queue = createDeliveryQueue(redis, config.QUEUE_PREFIX);
  queue.on("error", (error) => logger.warn({ err: error }, "queue error"));
  await warnUnlessNoEviction(redis, logger);

  const workerRedis = createRedis(config.REDIS_URL, "worker", logger);
  const processor = createDeliveryProcessor({
    db,
    provider: createSmsProvider(config),
    policy: {
      maxAttempts: config.MAX_DELIVERY_ATTEMPTS,
      baseDelayMs: config.RETRY_BASE_DELAY_MS,
      maxDelayMs: config.RETRY_MAX_DELAY_MS,
    },
    logger,
    now: () => new Date(),
    random: Math.random,
  });
  const worker = new Worker<DeliveryJobData>(DELIVERY_QUEUE, processor, {
    connection: workerRedis,
    prefix: config.QUEUE_PREFIX,
    concurrency: config.WORKER_CONCURRENCY,
    // A stalled job (its worker died) is safe to run again: the events say where it got to.
    maxStalledCount: 10,
  });
  worker.on("error", (error) => logger.error({ err: error }, "worker error"));
  worker.on("failed", (job, error) =>
    logger.warn({ err: error, messageId: job?.data.messageId }, "delivery job failed"),
  );

  let sweeping: Promise<unknown> = Promise.resolve();
  const sweepTimer = setInterval(() => {
    sweeping = sweep({ db, queue, now: () => new Date(), graceMs: config.SWEEP_GRACE_MS })
      .then((count) => count > 0 && logger.info({ count }, "sweeper re-enqueued messages without a job"))
      .catch((error: unknown) => logger.warn({ err: error }, "sweep failed"));
  }, config.SWEEP_INTERVAL_MS);

  logger.info(
    { concurrency: config.WORKER_CONCURRENCY, provider: config.SMS_PROVIDER },
    "delivery worker started",
  );

  onShutdown(logger, config.SHUTDOWN_TIMEOUT_MS, async () => {
    clearInterval(sweepTimer);
    await worker.close();
    await sweeping;
    await queue.close();
    redis.disconnect();
    workerRedis.disconnect();
    await sql.end({ timeout: 5 });
  });
}

runProcess(main);
