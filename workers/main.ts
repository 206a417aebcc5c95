import { setTimeout as sleep } from "node:timers/promises";
import { Worker } from "bullmq";
import { v7 as uuidv7 } from "uuid";
import { createDatabase } from "../db/client.js";
import { RENDER_DEADLINE_MS, renderSandbox } from "../src/channels/email/templates/sandbox.js";
import { createProviders, type Providers } from "../src/channels/index.js";
import { createMetrics } from "../src/observability/metrics.js";
import { coalesceWrites } from "../src/runtime/coalesce-writes.js";
import { loadConfig } from "../src/runtime/config.js";
import { onShutdown, runProcess } from "../src/runtime/lifecycle.js";
import { createLogger } from "../src/runtime/logger.js";
import { createOutboundAgent, outboundPost } from "../src/runtime/outbound/outbound-fetch.js";
import { twilioAccounts, unlistedTwilioAccountWarning } from "../src/runtime/provider-accounts.js";
import { createRedis } from "../src/runtime/redis.js";
import { assertUsableRedis, probeRedisWrite, warnUnlessNoEviction } from "../src/runtime/redis-checks.js";
import { RedisHealth } from "../src/runtime/redis-health.js";
import { describeRedis } from "../src/runtime/redis-topology.js";
import { webhookSecrets } from "../src/runtime/webhook-secrets.js";
import { createContentVault } from "../src/store/content.js";
import { type DeliveryJobData, DeliveryQueues } from "../src/store/delivery-queue.js";
import { DatabaseGate } from "./database-gate.js";
import { createDeliveryProcessor } from "./deliver.js";
import { createDeliveryStore } from "./delivery-store.js";
import { pruneIdempotencyKeys } from "./idempotency-pruner.js";
import { analyseYoungDayTables, maintainMessagePartitions } from "./message-partitions.js";
import { startOpsServer } from "./ops-server.js";
import { startOutboxRelay } from "./outbox-relay.js";
import { every } from "./periodic.js";
import { startScheduledSends } from "./scheduled-sends.js";
import { unconsumedShards } from "./shard-watch.js";
import { fillStatusReasons } from "./status-reasons.js";
import { moveStrayJobs } from "./stray-jobs.js";
import { sweep } from "./sweeper.js";
import { createThroughputLimiter } from "./throughput-limiter.js";
import { createThroughputLimits } from "./throughput-limits.js";
import { startWebhookDispatcher } from "./webhook-dispatcher.js";
import { purgeWebhookRows } from "./webhook-purger.js";

/** How often a worker deletes expired `Idempotency-Key` claims. */
const PRUNE_INTERVAL_MS = 60_000;
/** Partitions are made a week ahead and dropped by the day: a run every 10 minutes is plenty. */
const PARTITION_INTERVAL_MS = 10 * 60_000;
/** How often the worker looks for a day's tables grown without statistics (one question of the catalog). */
const YOUNG_DAY_TABLES_INTERVAL_MS = 5_000;
/** How often the worker looks for a delivery queue shard with jobs and no worker. */
const SHARD_WATCH_INTERVAL_MS = 60_000;

async function main(): Promise<void> {
  const config = loadConfig();
  const logger = createLogger({ level: config.LOG_LEVEL, name: "worker" });
  await assertUsableRedis(config.REDIS, logger);
  // Fail fast on an unreachable database, like the web process: the gate below waits it out.
  const { db, sql } = createDatabase({
    url: config.DATABASE_URL,
    poolSize: config.DATABASE_POOL_SIZE,
    statementTimeoutMs: config.DATABASE_STATEMENT_TIMEOUT_MS,
    connectTimeoutSeconds: 2,
  });
  // The Queue (relay, sweeper, metrics) fails fast while Redis is away: an abandoned addBulk or a
  // sweep's pipeline must not wait in ioredis's offline queue (replayed all at once on reconnect,
  // and holding up shutdown). The Worker waits for Redis, on a connection of its own.
  const redis = createRedis(config.REDIS, "fail-fast", logger);
  const workerRedis = createRedis(config.REDIS, "patient", logger);
  const queues = DeliveryQueues.create(redis, config.QUEUE_PREFIX, config.QUEUE_SHARDS);
  queues.on("error", (error) => logger.warn({ err: error }, "queue error"));
  const queue = queues.first;
  // On the patient client, which waits for the connection instead of failing before it.
  await warnUnlessNoEviction(workerRedis, logger);

  const metrics = createMetrics({ process: "worker", queue: queues, db });
  // Whether Redis takes the worker's writes; a persistent refusal pauses the work that needs it.
  const workers: Worker<DeliveryJobData>[] = [];
  const pauseWorker = () => {
    for (const worker of workers) {
      void worker.pause(true).catch((error: unknown) => logger.warn({ err: error }, "could not pause"));
    }
  };
  const resumeWhenHealthy = () => {
    if (database.available && !redisHealth.stall) for (const worker of workers) worker.resume();
  };
  const redisHealth = new RedisHealth({
    logger,
    probe: () =>
      probeRedisWrite(
        redis,
        config.REDIS,
        queues.all.map((shard) => shard.toKey("health-probe")),
      ),
    onStalled: () => {
      metrics.redisStalled(true);
      pauseWorker();
    },
    onRecovered: () => {
      metrics.redisStalled(false);
      resumeWhenHealthy();
    },
    onError: (kind) => metrics.redisError(kind),
  });
  const ops =
    config.WORKER_METRICS_PORT > 0
      ? startOpsServer({
          db,
          queue,
          queues,
          metrics,
          logger,
          port: config.WORKER_METRICS_PORT,
          hostname: config.WORKER_METRICS_HOST,
          redisRefuses: () => {
            const stall = redisHealth.stall;
            return stall && `refuses writes (${stall.kind}) since ${stall.since.toISOString()}`;
          },
        })
      : undefined;

  // Commands of concurrent jobs (and the relay's) leave in one socket write per loop turn.
  coalesceWrites(redis);
  coalesceWrites(workerRedis);
  // While Postgres is unreachable the worker takes no jobs (paused) and burns no attempts.
  const database = new DatabaseGate({
    probe: () => sql`select 1`,
    probeIntervalMs: config.DATABASE_PROBE_INTERVAL_MS,
    logger,
    onUnavailable: pauseWorker,
    onAvailable: resumeWhenHealthy,
  });
  const providers = await createProviders(config, {
    // Provider lists (docs/decisions/0046): each failover counted, each breaker's change logged.
    onFailover: (channel, from, to) => metrics.providerFailover(channel, from, to),
    onBreakerChange: (channel, provider, from, to) => {
      const fields = { channel, provider, from, to };
      if (to === "open")
        logger.warn(
          fields,
          "provider circuit breaker opened: the account is skipped until its cool-down is over",
        );
      else
        logger.info(
          fields,
          `provider circuit breaker ${to === "closed" ? "closed" : "half-open: one probe"}`,
        );
    },
  });
  metrics.watchProviderBreakers(() =>
    Object.entries(providers).flatMap(([channel, provider]) =>
      (provider.breakers?.() ?? []).map((reading) => ({ channel, ...reading })),
    ),
  );
  // Status webhooks: POSTs the deliveries the fan-out trigger writes (docs/decisions/0036). Only
  // Postgres is involved, so it pauses with the database gate and not with Redis.
  const secrets = webhookSecrets(config);
  if (secrets.development) {
    logger.warn("WEBHOOK_SECRET_KEY is unset: webhook secrets are sealed under the public development key");
  }
  const webhooks = startWebhookDispatcher({
    sql,
    logger,
    secrets,
    // Webhook URLs have networks of their own: OUTBOUND_ALLOWED_NETWORKS opens networks to push only.
    post: outboundPost(createOutboundAgent({ allowedNetworks: config.WEBHOOK_ALLOWED_NETWORKS })),
    newId: uuidv7,
    now: () => new Date(),
    random: Math.random,
    concurrency: config.WEBHOOK_CONCURRENCY,
    endpointConcurrency: config.WEBHOOK_ENDPOINT_CONCURRENCY,
    leaseMs: config.WEBHOOK_LEASE_MS,
    metrics,
    database,
  });

  // E-mails waiting for a render hold delivery slots: at most half of them (decision 0029).
  renderSandbox.configure({
    threads: config.TEMPLATE_RENDER_THREADS,
    queuePerOrganization: config.TEMPLATE_RENDER_QUEUE_PER_ORGANIZATION,
    maxUnderWay: Math.max(1, Math.floor(config.WORKER_CONCURRENCY / 2)),
  });
  const processor = createDeliveryProcessor({
    db,
    store: createDeliveryStore(sql, createContentVault(sql, config, logger), logger, webhooks.handoff),
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
    // Per SMS sender id and provider account, shared by every worker through Redis (decision
    // 0048). On the fail-fast client: while Redis is away a limited delivery waits, never sends.
    // A tenth of the slots at most wait (up to 200 ms each) for a turn that is about to come.
    throughput: createThroughputLimits({
      settings: config,
      limiter: createThroughputLimiter(redis),
      holdSlots: Math.max(1, Math.floor(config.WORKER_CONCURRENCY / 10)),
      logger,
      random: Math.random,
    }),
  });
  const deliveries = trackInFlight(processor);
  // One BullMQ Worker per shard consumed, WORKER_CONCURRENCY split between them (per shard, not
  // shared: a busy shard cannot borrow an idle one's slots).
  const consumed = config.QUEUE_SHARDS_CONSUMED;
  const concurrency = Math.max(1, Math.ceil(config.WORKER_CONCURRENCY / consumed.length));
  if (config.WORKER_CONCURRENCY < consumed.length) {
    logger.warn(
      { WORKER_CONCURRENCY: config.WORKER_CONCURRENCY, shards: consumed.length, perShard: concurrency },
      "WORKER_CONCURRENCY is below the shards this worker consumes: each shard's Worker still runs one job at a time, so more run at once than WORKER_CONCURRENCY",
    );
  }
  for (const shard of consumed) {
    const worker = new Worker<DeliveryJobData>(queues.all[shard]?.name ?? "", deliveries.run, {
      connection: workerRedis,
      prefix: config.QUEUE_PREFIX,
      concurrency,
      // A stalled job (its worker died) is safe to run again: the events say where it got to.
      maxStalledCount: 10,
      lockDuration: config.WORKER_LOCK_DURATION_MS,
      stalledInterval: config.WORKER_STALLED_INTERVAL_MS,
    });
    worker.on("error", (error) => {
      if (!redisHealth.report(error)) logger.error({ err: error }, "worker error");
    });
    worker.on("failed", (job, error) => {
      if (!redisHealth.report(error))
        logger.warn({ err: error, messageId: job?.data.messageId }, "delivery job failed");
    });
    workers.push(worker);
  }

  const databaseUp = () => database.available;
  const databaseUpAndRedisTakesWrites = () => database.available && !redisHealth.stall;
  // First the jobs of stray queues (an older release's, shards beyond QUEUE_SHARDS) move into their
  // messages' shards, then the sweeper adds the jobs that are nowhere (docs/decisions/0041).
  const sweeper = every(config.SWEEP_INTERVAL_MS, databaseUpAndRedisTakesWrites, () =>
    moveStrayJobs(redis, queues, Date.now)
      .then(
        (count) =>
          count > 0 && logger.info({ count }, "moved jobs of stray delivery queues into their shards"),
      )
      .then(() => sweep({ db, queue: queues, now: () => new Date(), graceMs: config.SWEEP_GRACE_MS }))
      .then((count) => count > 0 && logger.info({ count }, "sweeper re-enqueued messages without a job"))
      .catch((error: unknown) => redisHealth.report(error) || logger.warn({ err: error }, "sweep failed")),
  );
  // A shard with jobs and no worker (a pool scaled to zero, QUEUE_SHARDS raised without one).
  const shardWatch = every(SHARD_WATCH_INTERVAL_MS, databaseUpAndRedisTakesWrites, () =>
    unconsumedShards(queues)
      .then((shards) => {
        for (const shard of shards) {
          logger.warn(
            shard,
            "a delivery queue shard holds jobs and no worker consumes it (QUEUE_SHARDS_CONSUMED)",
          );
        }
      })
      .catch(
        (error: unknown) => redisHealth.report(error) || logger.warn({ err: error }, "shard watch failed"),
      ),
  );
  const pruner = every(PRUNE_INTERVAL_MS, databaseUp, () =>
    pruneIdempotencyKeys(sql, { now: new Date() })
      .then((count) => count > 0 && logger.info({ count }, "deleted expired idempotency keys"))
      .catch((error: unknown) => logger.warn({ err: error }, "idempotency key pruning failed")),
  );

  const unlistedTwilio = unlistedTwilioAccountWarning(config);
  if (unlistedTwilio) logger.warn(unlistedTwilio);
  if (twilioAccounts(config).length > 0 && !config.PUBLIC_BASE_URL) {
    logger.warn(
      "PUBLIC_BASE_URL is unset: Twilio is asked for no status callbacks, so no SMS delivery receipt will arrive",
    );
  }
  // Deliveries no endpoint will send (deleted or disabled) and attempts of deleted endpoints or
  // past their retention, a chunk at a time (docs/decisions/0036).
  const webhookPurger = every(PRUNE_INTERVAL_MS, databaseUp, () =>
    purgeWebhookRows(sql, {
      now: new Date(),
      attemptRetentionMs: config.WEBHOOK_ATTEMPT_RETENTION_DAYS * 86_400_000,
    })
      .then(
        (purged) =>
          purged.deliveries + purged.attempts + purged.expiredAttempts > 0 &&
          logger.info(purged, "purged webhook deliveries and attempts"),
      )
      .catch((error: unknown) => logger.warn({ err: error }, "webhook purge failed")),
  );

  // The day partitions of message_events and messages: made ahead, dropped past retention
  // (docs/decisions/0042). Once at start, so a worker that was away catches up at once.
  const maintainPartitions = () =>
    maintainMessagePartitions(sql, { now: new Date(), retentionDays: config.MESSAGE_RETENTION_DAYS })
      .then(({ created, dropped, defaultHoldsRows, failed }) => {
        for (const { step, error } of failed)
          logger.warn({ err: error, step }, "message partition step failed (tried again on the next run)");
        if (created + dropped > 0)
          logger.info({ created, dropped }, "message partitions created and dropped");
        if (defaultHoldsRows)
          logger.warn(
            "the default partitions of message_events or messages hold rows (ids no partition covers, see docs/operations.md): retention does not drop them there",
          );
      })
      .catch((error: unknown) => logger.warn({ err: error }, "message partition maintenance failed"));
  const firstPartitionRun = database.available ? maintainPartitions() : Promise.resolve();
  // Once per release that asks for it, in the background (a large history takes a while; one cut
  // short by a shutdown is rolled back and done again at the next start).
  void fillStatusReasons(sql)
    .then((filled) => filled && logger.info({ filled }, "filled the status_reason of ended messages"))
    .catch((error: unknown) =>
      logger.warn({ err: error }, "filling status_reason failed (tried again at the next start)"),
    );
  const partitions = every(PARTITION_INTERVAL_MS, databaseUp, maintainPartitions);
  // A day's tables counted by ANALYZE as soon as they hold rows, not a minute or more later by
  // autovacuum: until then the loads on them are planned blind (workers/message-partitions.ts).
  const notAnalysableWarned = new Set<string>();
  const youngDayTables = every(YOUNG_DAY_TABLES_INTERVAL_MS, databaseUp, () =>
    analyseYoungDayTables(sql, new Date())
      .then(({ analysed, notAnalysable }) => {
        if (analysed.length > 0)
          logger.info({ tables: analysed }, "analysed day tables that had no statistics yet");
        for (const table of notAnalysable) {
          if (notAnalysableWarned.has(table)) continue;
          if (notAnalysableWarned.size >= 100) notAnalysableWarned.clear();
          notAnalysableWarned.add(table);
          logger.warn(
            { table },
            "a day's table has no statistics yet and the worker's role may not analyse it (not its owner): loads on it are planned without them until autovacuum's ANALYZE",
          );
        }
      })
      .catch((error: unknown) =>
        logger.warn({ err: error }, "analysing the day tables failed (tried again in 5 s)"),
      ),
  );

  // Scheduled sends whose `send_at` came move into the outbox (docs/decisions/0044).
  const scheduledSends = startScheduledSends({
    sql,
    queuePrefix: config.QUEUE_PREFIX,
    logger,
    when: databaseUp,
  });

  // Moves accepted messages from the delivery outbox into the queue (the API never talks to Redis).
  const relay = startOutboxRelay({
    sql,
    queue: queues,
    logger,
    redisHealth,
    waitingLimit: config.QUEUE_WAITING_LIMIT,
  });

  logger.info(
    {
      concurrency: config.WORKER_CONCURRENCY,
      shards: consumed.map((shard) => queues.all[shard]?.name),
      redis: describeRedis(config.REDIS),
      providers: Object.fromEntries(Object.entries(providers).map(([channel, { name }]) => [channel, name])),
    },
    "delivery worker started",
  );

  onShutdown(logger, config.SHUTDOWN_TIMEOUT_MS, async () => {
    const periodicStopped = Promise.all([
      scheduledSends.stop(),
      sweeper.stop(),
      shardWatch.stop(),
      pruner.stop(),
      webhookPurger.stop(),
      partitions.stop(),
      youngDayTables.stop(),
      firstPartitionRun,
    ]);
    // Attempts under way get a few seconds; one cut short is tried again once its lease is over.
    const webhooksStopped = webhooks.stop(Math.min(5_000, config.SHUTDOWN_TIMEOUT_MS / 4));
    database.close();
    redisHealth.close();
    await ops?.close();
    if (workerRedis.status === "ready") {
      await Promise.all(workers.map((worker) => worker.close()));
    } else {
      // BullMQ's graceful close waits for Redis to take the jobs' bookkeeping (completion, a retry's
      // delay), which with Redis away means waiting for the shutdown deadline. Outcomes go to
      // Postgres, so: stop taking jobs at once, and give the deliveries under way the time a
      // provider call may take to record theirs. A job left waiting on Redis after that is taken
      // again later as stalled, and finds its message where its events left it.
      await Promise.all(workers.map((worker) => worker.close(true)));
      await Promise.race([deliveries.idle(), sleep(longestDeliveryMs(providers) + 1000)]);
    }
    // After the jobs: any render they still wait for finishes first.
    await renderSandbox.close();
    await periodicStopped;
    await webhooksStopped;
    await relay.stop();
    await Promise.all(Object.values(providers).map((provider) => provider.close?.()));
    await queues.close();
    redis.disconnect();
    workerRedis.disconnect();
    await sql.end({ timeout: 5 });
  });
}

/** The longest one delivery may take: an e-mail's render, then a call of the slowest provider. */
function longestDeliveryMs(providers: Providers): number {
  return RENDER_DEADLINE_MS + Math.max(0, ...Object.values(providers).map((p) => p.timeoutMs ?? 0));
}

/** Wraps a job processor to know when no call of it is running. */
function trackInFlight<A extends unknown[], R>(run: (...args: A) => Promise<R>) {
  let running = 0;
  const whenIdle: Array<() => void> = [];
  return {
    run: async (...args: A): Promise<R> => {
      running++;
      try {
        return await run(...args);
      } finally {
        running--;
        if (running === 0) for (const resolve of whenIdle.splice(0)) resolve();
      }
    },
    idle: (): Promise<void> =>
      running === 0 ? Promise.resolve() : new Promise((resolve) => whenIdle.push(resolve)),
  };
}

runProcess(main);
