import { Redis } from "ioredis";
import { ConfigError } from "./config.js";
import type { Logger } from "./logger.js";

/** How long the start-up check waits for Redis before leaving it to the processes' own waiting. */
const CHECK_TIMEOUT_MS = 5000;

/**
 * Looks once, at start-up, at what `REDIS_URL` answers. A Redis this service cannot work with
 * stops the process with one message that names the setting to change, instead of a process
 * that runs and fails every queue command for as long as it lives: a Redis Cluster node (its
 * queues' keys would be refused as CROSSSLOT), a read-only replica, a Sentinel, or a refused
 * login. A Redis that does not answer is no reason to stop: the processes wait out an outage
 * (the API keeps accepting; the outbox holds the work).
 */
export async function assertUsableRedis(url: string, logger: Logger): Promise<void> {
  const where = hostOf(url);
  const redis = new Redis(url, {
    lazyConnect: true,
    connectTimeout: CHECK_TIMEOUT_MS,
    commandTimeout: CHECK_TIMEOUT_MS,
    maxRetriesPerRequest: 0,
    enableOfflineQueue: false,
    retryStrategy: () => null,
  });
  const errors: Error[] = [];
  redis.on("error", (error: Error) => errors.push(error));
  try {
    await redis.connect();
    const problem = whatIsWrong(await redis.info());
    if (problem) throw new ConfigError(`Invalid configuration:\n  REDIS_URL: Redis at ${where} ${problem}`);
  } catch (error) {
    if (error instanceof ConfigError) throw error;
    const refused = [error, ...errors].find((e) => e instanceof Error && LOGIN_REFUSED.test(e.message));
    if (refused instanceof Error) {
      throw new ConfigError(
        `Invalid configuration:\n  REDIS_URL: Redis at ${where} refused the login (${refused.message.split(" ")[0]}): ` +
          "give its user and password in the URL, redis://user:password@host:port",
      );
    }
    logger.warn({ err: errors[0] ?? error, redis: where }, "could not check Redis at start-up; going on");
  } finally {
    redis.disconnect();
  }
}

/**
 * A write as the worker's would make it, for {@link RedisHealth}'s probe: it fails while the node
 * is a replica, a Cluster node, out of memory under noeviction, or refusing the login.
 */
export async function probeRedisWrite(redis: Redis, queuePrefix: string): Promise<void> {
  const problem = whatIsWrong(await redis.info());
  if (problem) throw new Error(`Redis ${problem}`);
  await redis.set(`${queuePrefix}:health-probe`, "1", "PX", 10_000);
}

/** Redis's answers to a login it refuses (no password given, a wrong one, an unknown user). */
const LOGIN_REFUSED = /^(NOAUTH|WRONGPASS|ERR (invalid password|AUTH))/;

/** What about the node `INFO` describes makes it unusable here, if anything. */
function whatIsWrong(info: string): string | undefined {
  const field = (name: string) => info.match(new RegExp(`^${name}:(.*)$`, "m"))?.[1]?.trim();
  if (field("redis_mode") === "sentinel") {
    return "is a Sentinel, not a data node: point REDIS_URL at the primary it manages (this service does not discover it through Sentinel yet)";
  }
  if (field("cluster_enabled") === "1") {
    return "is a Redis Cluster node (cluster_enabled:1), and this service needs a standalone Redis: its queues keep keys of several slots together (CROSSSLOT on a cluster); point REDIS_URL at a standalone primary";
  }
  if (field("role") === "slave") {
    return "is a read-only replica (role:slave): point REDIS_URL at the primary (after a failover, the new one)";
  }
  return undefined;
}

/** `host:port` of a Redis URL, without its user or password. */
function hostOf(url: string): string {
  try {
    const parsed = new URL(url);
    return `${parsed.hostname}:${parsed.port || "6379"}`;
  } catch {
    return "REDIS_URL";
  }
}

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
