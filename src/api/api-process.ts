import { serve } from "@hono/node-server";
import type postgres from "postgres";
import { v7 as uuidv7 } from "uuid";
import { createDatabase } from "../../db/client.js";
import { renderSandbox } from "../channels/email/templates/sandbox.js";
import { createMetrics } from "../observability/metrics.js";
import { coalesceWrites } from "../runtime/coalesce-writes.js";
import type { Config } from "../runtime/config.js";
import { onShutdown } from "../runtime/lifecycle.js";
import type { Logger } from "../runtime/logger.js";
import { createRedis } from "../runtime/redis.js";
import { createContentVault } from "../store/content.js";
import { createDeliveryQueue } from "../store/delivery-queue.js";
import { createMessageStore, type MessageStore } from "../store/message-store.js";
import { createApp } from "./app.js";

/** One process serving the notification API: opens its connections, serves, shuts down on SIGTERM. */
export function startApiProcess(config: Config, logger: Logger): void {
  const { db, sql } = createDatabase({
    url: config.DATABASE_URL,
    poolSize: config.DATABASE_POOL_SIZE,
    statementTimeoutMs: config.DATABASE_STATEMENT_TIMEOUT_MS,
    connectTimeoutSeconds: 1.5, // a 503 within 2 s when Postgres is unreachable
  });
  const redis = createRedis(config.REDIS_URL, "fail-fast", logger);
  // The per-request rate-limit command of concurrent requests leaves in one write.
  coalesceWrites(redis);
  const queue = createDeliveryQueue(redis, config.QUEUE_PREFIX);
  queue.on("error", (error) => logger.warn({ err: error }, "queue error"));

  const metrics = createMetrics({ process: "web", queue, db });
  const store = messageStoreFor(config, sql, logger);
  const app = createApp({ config, db, store, queue, logger, metrics, now: () => new Date(), newId: uuidv7 });
  const server = serve({ fetch: app.fetch, port: config.PORT }, (info) => {
    logger.info({ port: info.port }, `notification API listening on http://127.0.0.1:${info.port}`);
  });

  onShutdown(logger, config.SHUTDOWN_TIMEOUT_MS, async () => {
    await new Promise<void>((resolve) => server.close(() => resolve()));
    // After the requests: a preview still rendering on the sandbox's thread finishes first.
    await renderSandbox.close();
    await queue.close();
    redis.disconnect();
    await sql.end({ timeout: 5 });
  });
}

/**
 * The message store of an API process. While a statement stalls, at most `DATABASE_QUEUE_LIMIT`
 * requests wait for the next one (one more is refused at once, 503), and none is kept past the
 * request deadline, whose 503 has answered its client by then.
 */
export function messageStoreFor(config: Config, sql: postgres.Sql, logger?: Logger): MessageStore {
  return createMessageStore({
    sql,
    queuePrefix: config.QUEUE_PREFIX,
    limits: { maxWaiting: config.DATABASE_QUEUE_LIMIT, maxWaitMs: config.REQUEST_TIMEOUT_MS },
    content: createContentVault(sql, config, logger),
  });
}
