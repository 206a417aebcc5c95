import type { Redis } from "ioredis";
import type { Logger } from "../src/runtime/logger.js";

/** BullMQ loses jobs if Redis may evict keys; say so loudly at start-up. */
export async function warnUnlessNoEviction(redis: Redis, logger: Logger): Promise<void> {
  try {
    const reply = (await redis.config("GET", "maxmemory-policy")) as string[];
    const policy = reply[1];
    if (policy && policy !== "noeviction") {
      logger.warn(
        { maxmemoryPolicy: policy },
        `Redis maxmemory-policy is "${policy}": Redis may evict queued jobs under memory pressure. Set it to "noeviction".`,
      );
    }
  } catch (error) {
    logger.warn({ err: error }, "could not read Redis maxmemory-policy (CONFIG GET refused?)");
  }
}
