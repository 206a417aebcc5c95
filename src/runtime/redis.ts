import { Cluster, Redis, type RedisOptions } from "ioredis";
import type { Logger } from "./logger.js";
import type { RedisTopology } from "./redis-topology.js";

/** A connection to the service's Redis: one node (directly or through Sentinels), or a Cluster. */
export type RedisClient = Redis | Cluster;

export type RedisRole = "fail-fast" | "patient";

/**
 * `fail-fast`: a command while Redis is away errors at once instead of waiting in ioredis's
 * offline queue, so nothing is held up by Redis and nothing piles up meanwhile (BullMQ's advice
 * for a Queue): the API's rate limiter, and the worker's Queue (relay, sweeper, metrics), which
 * try again on their next turn.
 * `patient`: a BullMQ Worker needs `maxRetriesPerRequest: null` and waits for Redis.
 *
 * The topology (docs/decisions/0041) decides the client: a `Redis` for one node or for the primary
 * the Sentinels name (asked again after every failover; a `READONLY` from a demoted primary makes
 * it reconnect to the new one and send the command again), a `Cluster` for a Redis Cluster (slots
 * discovered from the seed nodes, `MOVED`/`ASK` followed, refreshed after a failover).
 */
export function createRedis(topology: RedisTopology, role: RedisRole, logger: Logger): RedisClient {
  const redis = connect(topology, role);
  let lastLoggedAt = 0;
  redis.on("error", (error: Error) => {
    // While Redis is down ioredis reports every reconnect; one line every 10 s is enough.
    if (Date.now() - lastLoggedAt > 10_000) {
      lastLoggedAt = Date.now();
      logger.warn({ err: error }, "redis connection error");
    }
  });
  return redis;
}

const retryStrategy = (attempt: number) => Math.min(attempt * 200, 2000);

/** Options of every connection to a data node of the topology, for a client in this role. */
export function nodeOptions(topology: RedisTopology, role: RedisRole | "check"): RedisOptions {
  const byRole: RedisOptions =
    role === "fail-fast"
      ? { enableOfflineQueue: false, maxRetriesPerRequest: 1, connectTimeout: 2000 }
      : role === "patient"
        ? { maxRetriesPerRequest: null }
        : {
            lazyConnect: true,
            connectTimeout: 5000,
            commandTimeout: 5000,
            maxRetriesPerRequest: 0,
            enableOfflineQueue: false,
          };
  return {
    ...byRole,
    retryStrategy: role === "check" ? () => null : retryStrategy,
    ...(topology.tls ? { tls: topology.tls } : {}),
    ...(topology.username ? { username: topology.username } : {}),
    ...(topology.password ? { password: topology.password } : {}),
  };
}

function connect(topology: RedisTopology, role: RedisRole): RedisClient {
  const options = nodeOptions(topology, role);
  switch (topology.kind) {
    case "single":
      return new Redis(topology.url, options);
    case "sentinel":
      return new Redis({ ...options, ...sentinelOptions(topology), retryStrategy });
    case "cluster": {
      const { enableOfflineQueue, retryStrategy: _perNode, ...redisOptions } = options;
      return new Cluster(
        topology.nodes.map(({ host, port }) => ({ host, port })),
        {
          redisOptions,
          enableOfflineQueue: enableOfflineQueue ?? true,
          clusterRetryStrategy: retryStrategy,
          // A failover: the slots move to the promoted replica; wait for it rather than fail.
          retryDelayOnClusterDown: 300,
          retryDelayOnFailover: 200,
          // The patient role waits out a failover of a production cluster (node timeout 15 s by
          // default: ~30 s of redirections); the fail-fast one gives up after ioredis's 16.
          ...(role === "patient" ? { maxRedirections: 100 } : {}),
          slotsRefreshTimeout: 2000,
          // With TLS the certificates name the nodes as the cluster announces them.
          ...(topology.tls ? { dnsLookup: (address, callback) => callback(null, address) } : {}),
        },
      );
    }
    default: {
      const never: never = topology;
      return never;
    }
  }
}

/** What a client needs to find the primary through the Sentinels (and to reach them). */
export function sentinelOptions(topology: Extract<RedisTopology, { kind: "sentinel" }>): RedisOptions {
  return {
    sentinels: topology.sentinels.map(({ host, port }) => ({ host, port })),
    name: topology.name,
    role: "master",
    ...(topology.sentinelUsername ? { sentinelUsername: topology.sentinelUsername } : {}),
    ...(topology.sentinelPassword ? { sentinelPassword: topology.sentinelPassword } : {}),
    ...(topology.tls ? { enableTLSForSentinelMode: true, sentinelTLS: topology.tls } : {}),
    sentinelRetryStrategy: retryStrategy,
    // No `failoverDetector`: its reconnect, racing the one a killed primary causes, can leave the
    // client ended for good ("Connection is closed", status end: a worker that never takes a job
    // again). A dropped connection or a READONLY is what sends the client back to the Sentinels.
    // A primary the Sentinels demoted answers READONLY until the client asks them again: do so,
    // and send the refused command again (it did not run).
    reconnectOnError: (error) => (/^READONLY\b/.test(error.message) ? 2 : false),
  };
}

/** Every master of the client (a Cluster's), or the client itself. */
export function dataNodes(redis: RedisClient): Redis[] {
  return redis instanceof Cluster ? redis.nodes("master") : [redis];
}
