import { readFileSync } from "node:fs";

/** One Redis address: a Cluster's seed node, or a Sentinel. */
export interface RedisNode {
  host: string;
  port: number;
}

/** What every Redis connection of a topology shares: credentials and TLS. */
interface RedisAccess {
  /** TLS options for node:tls (`{}`: TLS with the system's CAs); undefined: plain TCP. */
  tls: { ca?: string } | undefined;
}

/**
 * Where the service's Redis is, from the `REDIS_*` settings (docs/decisions/0041): one node (or a
 * replicated primary reached directly), a Redis Cluster found from seed nodes, or a primary the
 * Sentinels name (found again after every failover).
 */
export type RedisTopology =
  | ({ kind: "single"; url: string; username?: string; password?: string } & RedisAccess)
  | ({ kind: "cluster"; nodes: readonly RedisNode[]; username?: string; password?: string } & RedisAccess)
  | ({
      kind: "sentinel";
      sentinels: readonly RedisNode[];
      name: string;
      username?: string;
      password?: string;
      sentinelUsername?: string;
      sentinelPassword?: string;
    } & RedisAccess);

/** The `REDIS_*` settings as the config schema parsed them. */
export interface RedisSettings {
  REDIS_URL: string;
  REDIS_CLUSTER_NODES?: readonly RedisNode[] | undefined;
  REDIS_SENTINELS?: readonly RedisNode[] | undefined;
  REDIS_SENTINEL_NAME?: string | undefined;
  REDIS_USERNAME?: string | undefined;
  REDIS_PASSWORD?: string | undefined;
  REDIS_SENTINEL_USERNAME?: string | undefined;
  REDIS_SENTINEL_PASSWORD?: string | undefined;
  REDIS_TLS: boolean;
  REDIS_TLS_CA_FILE?: string | undefined;
}

/**
 * The topology the settings describe, or the problems that stop start-up, each naming its
 * variable. `urlGiven`: whether REDIS_URL was set (its default must not clash with a cluster).
 */
export function redisTopologyFrom(
  s: RedisSettings,
  urlGiven: boolean,
): { topology: RedisTopology; problems: [] } | { topology?: undefined; problems: string[] } {
  const problems: string[] = [];
  const cluster = s.REDIS_CLUSTER_NODES;
  const sentinels = s.REDIS_SENTINELS;
  if (cluster && sentinels) {
    problems.push(
      "REDIS_CLUSTER_NODES / REDIS_SENTINELS: set one or neither (a Redis Cluster, or a primary managed by Sentinels)",
    );
  }
  if ((cluster || sentinels) && urlGiven) {
    problems.push(
      `REDIS_URL: unset it when ${cluster ? "REDIS_CLUSTER_NODES" : "REDIS_SENTINELS"} is set (one Redis setting: a URL, cluster nodes or Sentinels)`,
    );
  }
  if (sentinels && !s.REDIS_SENTINEL_NAME) {
    problems.push(
      "REDIS_SENTINEL_NAME: required when REDIS_SENTINELS is set (the name the Sentinels monitor)",
    );
  }
  if (!sentinels) {
    for (const name of [
      "REDIS_SENTINEL_NAME",
      "REDIS_SENTINEL_USERNAME",
      "REDIS_SENTINEL_PASSWORD",
    ] as const) {
      if (s[name]) problems.push(`${name}: only with REDIS_SENTINELS`);
    }
  }
  if (s.REDIS_USERNAME && !s.REDIS_PASSWORD) problems.push("REDIS_USERNAME: needs REDIS_PASSWORD");
  if (s.REDIS_SENTINEL_USERNAME && !s.REDIS_SENTINEL_PASSWORD) {
    problems.push("REDIS_SENTINEL_USERNAME: needs REDIS_SENTINEL_PASSWORD");
  }
  const url = new URL(s.REDIS_URL);
  const single = !cluster && !sentinels;
  if (single && (s.REDIS_PASSWORD || s.REDIS_USERNAME) && (url.password || url.username)) {
    problems.push(
      "REDIS_PASSWORD: REDIS_URL carries a user or password already; give the credentials in one place",
    );
  }
  const tlsOn = s.REDIS_TLS || (single && url.protocol === "rediss:");
  let ca: string | undefined;
  if (s.REDIS_TLS_CA_FILE) {
    if (!tlsOn) {
      problems.push("REDIS_TLS_CA_FILE: needs TLS (REDIS_TLS=true, or a rediss:// REDIS_URL)");
    } else {
      try {
        ca = readFileSync(s.REDIS_TLS_CA_FILE, "utf8");
        if (!ca.includes("-----BEGIN CERTIFICATE-----")) {
          problems.push(`REDIS_TLS_CA_FILE: ${s.REDIS_TLS_CA_FILE} holds no PEM certificate`);
        }
      } catch (error) {
        const code = (error as NodeJS.ErrnoException).code ?? "unreadable";
        problems.push(`REDIS_TLS_CA_FILE: cannot read ${s.REDIS_TLS_CA_FILE} (${code})`);
      }
    }
  }
  if (problems.length > 0) return { problems };

  const tls = tlsOn ? (ca ? { ca } : {}) : undefined;
  const credentials = {
    ...(s.REDIS_USERNAME ? { username: s.REDIS_USERNAME } : {}),
    ...(s.REDIS_PASSWORD ? { password: s.REDIS_PASSWORD } : {}),
  };
  if (cluster) return { topology: { kind: "cluster", nodes: cluster, tls, ...credentials }, problems: [] };
  if (sentinels) {
    return {
      topology: {
        kind: "sentinel",
        sentinels,
        name: s.REDIS_SENTINEL_NAME as string,
        tls,
        ...credentials,
        ...(s.REDIS_SENTINEL_USERNAME ? { sentinelUsername: s.REDIS_SENTINEL_USERNAME } : {}),
        ...(s.REDIS_SENTINEL_PASSWORD ? { sentinelPassword: s.REDIS_SENTINEL_PASSWORD } : {}),
      },
      problems: [],
    };
  }
  return { topology: { kind: "single", url: s.REDIS_URL, tls, ...credentials }, problems: [] };
}

/** Where a topology is, for messages and logs: addresses only, never a user or password. */
export function describeRedis(topology: RedisTopology): string {
  const list = (nodes: readonly RedisNode[]) =>
    nodes.map((n) => (n.host.includes(":") ? `[${n.host}]:${n.port}` : `${n.host}:${n.port}`)).join(",");
  switch (topology.kind) {
    case "single": {
      const url = new URL(topology.url);
      return `${url.hostname}:${url.port || "6379"}`;
    }
    case "cluster":
      return `the cluster of ${list(topology.nodes)}`;
    case "sentinel":
      return `the primary "${topology.name}" of the Sentinels ${list(topology.sentinels)}`;
    default: {
      const never: never = topology;
      return never;
    }
  }
}

/** The variable an operator changes to point the service at another Redis. */
export function redisSetting(topology: RedisTopology): string {
  return topology.kind === "cluster"
    ? "REDIS_CLUSTER_NODES"
    : topology.kind === "sentinel"
      ? "REDIS_SENTINELS"
      : "REDIS_URL";
}
