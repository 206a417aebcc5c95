import { Redis } from "ioredis";
import type { Logger } from "./logger.js";

/**
 * `api`: fail fast. A command while Redis is away errors at once instead of waiting, so a request
 * is never held up by Redis (the sweeper catches up later).
 * `worker`: be patient. BullMQ workers need `maxRetriesPerRequest: null` and wait for Redis.
 */
export function createRedis(url: string, role: "api" | "worker", logger: Logger): Redis {
  const redis = new Redis(url, {
    ...(role === "api"
      ? { enableOfflineQueue: false, maxRetriesPerRequest: 1, connectTimeout: 2000 }
      : { maxRetriesPerRequest: null }),
    retryStrategy: (attempt) => Math.min(attempt * 200, 2000),
  });
  let lastLoggedAt = 0;
  redis.on("error", (error) => {
    // While Redis is down ioredis reports every reconnect; one line every 10 s is enough.
    if (Date.now() - lastLoggedAt > 10_000) {
      lastLoggedAt = Date.now();
      logger.warn({ err: error }, "redis connection error");
    }
  });
  return redis;
}
