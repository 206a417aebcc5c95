import { Cluster, Redis } from "ioredis";
import { ConfigError } from "./config.js";
import type { Logger } from "./logger.js";
import { dataNodes, nodeOptions, type RedisClient, sentinelOptions } from "./redis.js";
import { type RedisNode, type RedisTopology, redisSetting } from "./redis-topology.js";

/**
 * Looks once, at start-up, at what the REDIS_* settings point at. A Redis this service cannot
 * work with stops the process with one message that names the setting to change, instead of a
 * process that runs and fails every queue command for as long as it lives: for `REDIS_URL`, a
 * Redis Cluster node, a read-only replica or a Sentinel; for `REDIS_CLUSTER_NODES`, a node that
 * is not a cluster node; for `REDIS_SENTINELS`, an address that is no Sentinel, or Sentinels that
 * know no primary of `REDIS_SENTINEL_NAME`; everywhere, a refused login. A Redis that does not
 * answer is no reason to stop: the processes wait out an outage (the API keeps accepting; the
 * outbox holds the work).
 */
export async function assertUsableRedis(topology: RedisTopology, logger: Logger): Promise<void> {
  try {
    switch (topology.kind) {
      case "single":
        return await checkDataNode(new Redis(topology.url, nodeOptions(topology, "check")), topology);
      case "cluster":
        return await checkCluster(topology);
      case "sentinel":
        await checkSentinels(topology);
        return await checkDataNode(
          new Redis({
            ...nodeOptions(topology, "check"),
            ...sentinelOptions(topology),
            sentinelRetryStrategy: () => null,
          }),
          topology,
        );
    }
  } catch (error) {
    if (error instanceof ConfigError) throw error;
    logger.warn({ err: error, redis: hostsOf(topology) }, "could not check Redis at start-up; going on");
  }
}

/** The data node a single URL or the Sentinels name: a primary, standalone, that takes our login. */
async function checkDataNode(redis: Redis, topology: RedisTopology): Promise<void> {
  const setting = redisSetting(topology);
  const where =
    topology.kind === "sentinel"
      ? `the primary "${topology.name}" the Sentinels name`
      : `Redis at ${addressOf(redis)}`;
  const errors: Error[] = [];
  redis.on("error", (error: Error) => errors.push(error));
  try {
    await redis.connect();
    const info = await redis.info();
    const problem = whatIsWrong(info, topology);
    // The primary the Sentinels name answering as a replica is a failover under way, over in
    // seconds: not a configuration to refuse (the caller warns and goes on; the clients follow
    // the Sentinels to the new primary).
    if (problem && topology.kind === "sentinel" && field(info, "role") === "slave") {
      throw new Error(`${where} ${problem}`);
    }
    if (problem) throw invalid(setting, `${where} ${problem}`);
  } catch (error) {
    throw (
      refusedLogin(error, errors, topology.kind === "single" ? "REDIS_URL" : "REDIS_PASSWORD", where) ?? error
    );
  } finally {
    redis.disconnect();
  }
}

/** Each seed node, until one answers: a cluster node that takes our login. */
async function checkCluster(topology: Extract<RedisTopology, { kind: "cluster" }>): Promise<void> {
  let lastError: unknown;
  for (const node of topology.nodes) {
    const redis = new Redis({ ...nodeOptions(topology, "check"), host: node.host, port: node.port });
    const errors: Error[] = [];
    redis.on("error", (error: Error) => errors.push(error));
    try {
      await redis.connect();
      const info = await redis.info();
      if (field(info, "cluster_enabled") !== "1") {
        throw invalid(
          "REDIS_CLUSTER_NODES",
          `Redis at ${address(node)} is not a Redis Cluster node (cluster_enabled:0): give a standalone Redis as REDIS_URL instead`,
        );
      }
      return;
    } catch (error) {
      const refused = refusedLogin(error, errors, "REDIS_PASSWORD", address(node));
      if (refused) throw refused;
      if (error instanceof ConfigError) throw error;
      lastError = error;
    } finally {
      redis.disconnect();
    }
  }
  throw lastError;
}

/** Each Sentinel, until one answers: a Sentinel that knows a primary of the name. */
async function checkSentinels(topology: Extract<RedisTopology, { kind: "sentinel" }>): Promise<void> {
  let lastError: unknown;
  for (const node of topology.sentinels) {
    const sentinel = new Redis({
      ...nodeOptions(topology, "check"),
      host: node.host,
      port: node.port,
      username: topology.sentinelUsername,
      password: topology.sentinelPassword,
    });
    const errors: Error[] = [];
    sentinel.on("error", (error: Error) => errors.push(error));
    try {
      await sentinel.connect();
      const mode = field(await sentinel.info("server"), "redis_mode");
      if (mode !== "sentinel") {
        throw invalid(
          "REDIS_SENTINELS",
          `Redis at ${address(node)} is not a Sentinel (redis_mode:${mode}): list the Sentinels, or give a standalone primary as REDIS_URL`,
        );
      }
      const primary = await sentinel.call("SENTINEL", "GET-MASTER-ADDR-BY-NAME", topology.name);
      if (primary === null) {
        throw invalid(
          "REDIS_SENTINEL_NAME",
          `the Sentinel at ${address(node)} monitors no primary named "${topology.name}"`,
        );
      }
      return;
    } catch (error) {
      const refused = refusedLogin(
        error,
        errors,
        "REDIS_SENTINEL_PASSWORD",
        `the Sentinel at ${address(node)}`,
      );
      if (refused) throw refused;
      if (error instanceof ConfigError) throw error;
      lastError = error;
    } finally {
      sentinel.disconnect();
    }
  }
  throw lastError;
}

function invalid(setting: string, problem: string): ConfigError {
  return new ConfigError(`Invalid configuration:\n  ${setting}: ${problem}`);
}

/** A ConfigError naming `setting` when Redis refused the login, or undefined. */
function refusedLogin(
  error: unknown,
  errors: Error[],
  setting: string,
  where: string,
): ConfigError | undefined {
  if (error instanceof ConfigError) return undefined;
  const refused = [error, ...errors].find((e) => e instanceof Error && LOGIN_REFUSED.test(e.message));
  if (!(refused instanceof Error)) return undefined;
  const how =
    setting === "REDIS_URL"
      ? "give its user and password in the URL, redis://user:password@host:port (or REDIS_USERNAME / REDIS_PASSWORD)"
      : `give the right ${setting}${setting.endsWith("PASSWORD") ? ` (and ${setting.replace("PASSWORD", "USERNAME")} for an ACL user)` : ""}`;
  return invalid(
    setting,
    `${/^(the|Redis at) /.test(where) ? where : `Redis at ${where}`} refused the login (${refused.message.split(" ")[0]}): ${how}`,
  );
}

/**
 * A write as the worker's would make it, for {@link RedisHealth}'s probe: it fails while the node
 * is a replica, a Cluster node taken for a single Redis, out of memory under noeviction, or
 * refusing the login. `keys`: one per queue, in its hash slot, so on a cluster each queue's
 * master is probed.
 */
export async function probeRedisWrite(
  redis: RedisClient,
  topology: RedisTopology,
  keys: readonly string[],
): Promise<void> {
  if (!(redis instanceof Cluster)) {
    const info = await redis.info();
    const problem = whatIsWrong(info, topology);
    if (problem && topology.kind === "sentinel" && field(info, "role") === "slave") {
      // A demoted primary: only a reconnect asks the Sentinels for the new one (no write was sent
      // whose READONLY would have made the client do it).
      redis.disconnect(true);
    }
    if (problem) throw new Error(`Redis ${problem}`);
  }
  await Promise.all(keys.map((key) => redis.set(key, "1", "PX", 10_000)));
}

/** Redis's answers to a login it refuses (no password given, a wrong one, an unknown user). */
const LOGIN_REFUSED = /^(NOAUTH|WRONGPASS|ERR (invalid password|AUTH))/;

const field = (info: string, name: string) => info.match(new RegExp(`^${name}:(.*)$`, "m"))?.[1]?.trim();

/** What about the node `INFO` describes makes it unusable as the topology's data node, if anything. */
function whatIsWrong(info: string, topology: RedisTopology): string | undefined {
  const setting = redisSetting(topology);
  if (field(info, "redis_mode") === "sentinel") {
    return `is a Sentinel, not a data node: give the Sentinels as REDIS_SENTINELS (with REDIS_SENTINEL_NAME) instead of ${setting}`;
  }
  if (topology.kind !== "cluster" && field(info, "cluster_enabled") === "1") {
    return `is a Redis Cluster node (cluster_enabled:1): give the cluster's nodes as REDIS_CLUSTER_NODES instead of ${setting}`;
  }
  if (field(info, "role") === "slave") {
    return topology.kind === "sentinel"
      ? "is a read-only replica (role:slave) though the Sentinels name it the primary: a failover under way?"
      : `is a read-only replica (role:slave): point ${setting} at the primary (after a failover, the new one), or give the Sentinels as REDIS_SENTINELS`;
  }
  return undefined;
}

function address(node: RedisNode): string {
  return node.host.includes(":") ? `[${node.host}]:${node.port}` : `${node.host}:${node.port}`;
}

/** `host:port` a client is (or would be) connected to, without its user or password. */
function addressOf(redis: Redis): string {
  return `${redis.options.host ?? "?"}:${redis.options.port ?? "?"}`;
}

function hostsOf(topology: RedisTopology): string {
  if (topology.kind === "single") {
    const url = new URL(topology.url);
    return `${url.hostname}:${url.port || "6379"}`;
  }
  return (topology.kind === "cluster" ? topology.nodes : topology.sentinels).map(address).join(",");
}

/** BullMQ loses jobs if Redis may evict keys; say so loudly at start-up. */
export async function warnUnlessNoEviction(redis: RedisClient, logger: Logger): Promise<void> {
  try {
    if (redis instanceof Cluster && redis.status !== "ready") {
      await new Promise((resolve) => redis.once("ready", resolve));
    }
    for (const node of dataNodes(redis)) {
      const reply = (await node.config("GET", "maxmemory-policy")) as string[];
      const policy = reply[1];
      if (!policy || policy === "noeviction") continue;
      logger.warn(
        { maxmemoryPolicy: policy, redis: addressOf(node) },
        `Redis maxmemory-policy is "${policy}": Redis may evict queued jobs under memory pressure. Set it to "noeviction".`,
      );
      return;
    }
  } catch (error) {
    logger.warn({ err: error }, "could not read Redis maxmemory-policy (CONFIG GET refused?)");
  }
}
