import { serve } from "@hono/node-server";
import { v7 as uuidv7 } from "uuid";
import { createDatabase } from "../db/client.js";
import { createApp } from "./app.js";
import { assertWebConfig, loadConfig } from "./config.js";
import { createLogger } from "./logger.js";
import { createDeliveryQueue } from "./messages/delivery-queue.js";
import { onShutdown, runProcess } from "./process.js";
import { createRedis } from "./redis.js";

function main(): void {
  const config = loadConfig();
  assertWebConfig(config);
  const logger = createLogger({ level: config.LOG_LEVEL, name: "web" });
  const { db, sql } = createDatabase({
    url: config.DATABASE_URL,
    poolSize: config.DATABASE_POOL_SIZE,
    connectTimeoutSeconds: 2,
  });
  const redis = createRedis(config.REDIS_URL, "api", logger);
  const queue = createDeliveryQueue(redis, config.QUEUE_PREFIX);
  queue.on("error", (error) => logger.warn({ err: error }, "queue error"));

  const app = createApp({ config, db, queue, logger, now: () => new Date(), newId: uuidv7 });
  const server = serve({ fetch: app.fetch, port: config.PORT }, (info) => {
    logger.info({ port: info.port }, `notification API listening on http://127.0.0.1:${info.port}`);
  });

  onShutdown(logger, config.SHUTDOWN_TIMEOUT_MS, async () => {
    await new Promise<void>((resolve) => server.close(() => resolve()));
    await queue.close();
    redis.disconnect();
    await sql.end({ timeout: 5 });
  });
}

runProcess(main);
