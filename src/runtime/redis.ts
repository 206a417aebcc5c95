import { Redis } from "ioredis";
import type { Logger } from "./logger.js";

/**
 * `fail-fast`: a command while Redis is away errors at once instead of waiting in ioredis's
 * offline queue, so nothing is held up by Redis and nothing piles up meanwhile (BullMQ's advice
 * for a Queue): the API's rate limiter, and the worker's Queue (relay, sweeper, metrics), which
 * try again on their next turn.
 * `patient`: a BullMQ Worker needs `maxRetriesPerRequest: null` and waits for Redis.
 */
export function createRedis(url: string, role: "fail-fast" | "patient", logger: Logger): Redis {
  const redis = new Redis(url, {
    ...(role === "fail-fast"
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
