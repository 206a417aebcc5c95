import { type ChildProcess, execFile, spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { Redis } from "ioredis";

const run = promisify(execFile);

/**
 * Redis topologies of a test's own, from the `redis-server` on PATH: a Redis Cluster and a
 * Sentinel group, on free ports, in a temporary directory, torn down after. Nothing persists
 * (`--save "" --appendonly no`); a node killed is gone with its keys, as a master lost for good.
 */

/** A free port whose cluster bus port (+10000) is free too. */
async function freeNodePort(): Promise<number> {
  for (let tries = 0; tries < 50; tries++) {
    const port = await listenOnce(0);
    if (port + 10_000 <= 65_535 && (await listenOnce(port + 10_000).catch(() => 0)) > 0) return port;
  }
  throw new Error("no free port pair for a cluster node");
}

function listenOnce(port: number): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(port, "127.0.0.1", () => {
      const address = server.address();
      server.close(() =>
        typeof address === "object" && address ? resolve(address.port) : reject(new Error("no port")),
      );
    });
  });
}

/** One redis-server process; `kill` is SIGKILL (a machine lost), `stop` a clean exit. */
class Node {
  readonly port: number;
  readonly #password: string | undefined;
  #child: ChildProcess;
  #output = "";
  readonly exited: Promise<void>;

  constructor(port: number, args: string[], password?: string) {
    this.port = port;
    this.#password = password;
    this.#child = spawn("redis-server", args, { stdio: ["ignore", "pipe", "pipe"] });
    const collect = (chunk: Buffer) => {
      this.#output = (this.#output + chunk.toString()).slice(-20_000);
    };
    this.#child.stdout?.on("data", collect);
    this.#child.stderr?.on("data", collect);
    this.exited = new Promise((resolve) => this.#child.on("exit", () => resolve()));
  }

  get address(): string {
    return `127.0.0.1:${this.port}`;
  }

  get running(): boolean {
    return this.#child.exitCode === null && this.#child.signalCode === null;
  }

  output(): string {
    return this.#output;
  }

  async kill(): Promise<void> {
    if (this.running) this.#child.kill("SIGKILL");
    await this.exited;
  }

  /** A short-lived client of this node (the caller disconnects it). */
  client(): Redis {
    const redis = new Redis(this.port, "127.0.0.1", {
      maxRetriesPerRequest: 1,
      retryStrategy: () => null,
      ...(this.#password ? { password: this.#password } : {}),
    });
    redis.on("error", () => {});
    return redis;
  }

  async info(): Promise<string> {
    const redis = this.client();
    try {
      return await redis.info();
    } finally {
      redis.disconnect();
    }
  }
}

/** A throw-away redis-server's options: loopback, no persistence, quiet; its files in `dir`. */
export const baseArgs = (port: number, dir: string) => [
  "--port",
  String(port),
  "--bind",
  "127.0.0.1",
  "--save",
  "",
  "--appendonly",
  "no",
  "--dir",
  dir,
  "--loglevel",
  "warning",
];

const field = (info: string, name: string) => info.match(new RegExp(`^${name}:(.*)$`, "m"))?.[1]?.trim();

async function until<T>(check: () => Promise<T | undefined>, timeoutMs: number, what: string): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let lastError: unknown;
  for (;;) {
    try {
      const value = await check();
      if (value !== undefined) return value;
    } catch (error) {
      lastError = error;
    }
    if (Date.now() > deadline) {
      throw new Error(
        `timed out after ${timeoutMs} ms waiting for ${what}${lastError ? `: ${String(lastError)}` : ""}`,
      );
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

async function answers(node: Node): Promise<true | undefined> {
  const redis = node.client();
  try {
    return (await redis.ping()) === "PONG" ? true : undefined;
  } finally {
    redis.disconnect();
  }
}

/** A Redis Cluster: `masters` masters (3 at least), each with `replicasPerMaster` replicas. */
export class RedisClusterUnderTest {
  readonly nodes: Node[];
  readonly #dir: string;

  private constructor(nodes: Node[], dir: string) {
    this.nodes = nodes;
    this.#dir = dir;
  }

  /** `password`: every node requires it (`requirepass`, and `masterauth` for the replicas). */
  static async start(
    options: { masters?: number; replicasPerMaster?: number; password?: string } = {},
  ): Promise<RedisClusterUnderTest> {
    const auth = options.password
      ? ["--requirepass", options.password, "--masterauth", options.password]
      : [];
    const masters = options.masters ?? 3;
    const replicas = options.replicasPerMaster ?? 0;
    const dir = mkdtempSync(join(tmpdir(), "redis-cluster-"));
    const nodes: Node[] = [];
    const cluster = new RedisClusterUnderTest(nodes, dir);
    try {
      for (let i = 0; i < masters * (1 + replicas); i++) {
        const port = await freeNodePort();
        nodes.push(
          new Node(
            port,
            [
              ...baseArgs(port, dir),
              "--cluster-enabled",
              "yes",
              "--cluster-config-file",
              `nodes-${port}.conf`,
              // A master silent this long is failed over to its replica.
              "--cluster-node-timeout",
              "2000",
              "--cluster-replica-validity-factor",
              "0",
              ...auth,
            ],
            options.password,
          ),
        );
      }
      for (const node of nodes) await until(() => answers(node), 10_000, `cluster node ${node.port}`);
      await run("redis-cli", [
        "--cluster",
        "create",
        ...nodes.map((node) => node.address),
        "--cluster-replicas",
        String(replicas),
        "--cluster-yes",
        ...(options.password ? ["-a", options.password, "--no-auth-warning"] : []),
      ]);
      await cluster.waitUntilHealthy();
      return cluster;
    } catch (error) {
      await cluster.close();
      throw error;
    }
  }

  /** `host:port,…` of every node, for REDIS_CLUSTER_NODES. */
  get seeds(): string {
    return this.nodes.map((node) => node.address).join(",");
  }

  /** Every running node reports `cluster_state:ok` and sees every slot served. */
  async waitUntilHealthy(timeoutMs = 30_000): Promise<void> {
    await until(
      async () => {
        for (const node of this.nodes.filter((n) => n.running)) {
          const redis = node.client();
          try {
            const info = String(await redis.call("CLUSTER", "INFO"));
            if (field(info, "cluster_state") !== "ok" || field(info, "cluster_slots_ok") !== "16384")
              return undefined;
          } finally {
            redis.disconnect();
          }
        }
        return true;
      },
      timeoutMs,
      "the cluster to be healthy",
    );
  }

  /** The node serving a key's slot as master. */
  async masterOf(key: string): Promise<Node> {
    const running = this.nodes.find((n) => n.running);
    if (!running) throw new Error("no node runs");
    const redis = running.client();
    try {
      const slot = Number(await redis.call("CLUSTER", "KEYSLOT", key));
      const shards = (await redis.call("CLUSTER", "SLOTS")) as Array<
        [number, number, [string, number, string]]
      >;
      const owner = shards.find(([from, to]) => slot >= from && slot <= to);
      const node = this.nodes.find((n) => n.port === owner?.[2][1]);
      if (!node) throw new Error(`no master serves slot ${slot}`);
      return node;
    } finally {
      redis.disconnect();
    }
  }

  /**
   * Kills a master (SIGKILL) and waits until its replica took its slots over and the cluster is
   * healthy again.
   */
  async killMaster(node: Node, timeoutMs = 30_000): Promise<void> {
    await node.kill();
    // Until the others notice (the node timeout), they still call the dead node the slots' master.
    await until(
      async () => {
        const running = this.nodes.find((n) => n.running);
        const redis = running?.client();
        try {
          const shards = (await redis?.call("CLUSTER", "SLOTS")) as Array<[number, number, [string, number]]>;
          return shards.every(([, , [, port]]) => port !== node.port) ? true : undefined;
        } finally {
          redis?.disconnect();
        }
      },
      timeoutMs,
      `a replica to take over the slots of ${node.address}`,
    );
    await this.waitUntilHealthy(timeoutMs);
  }

  async close(): Promise<void> {
    await Promise.all(this.nodes.map((node) => node.kill()));
    rmSync(this.#dir, { recursive: true, force: true });
  }
}

/** A primary, its replica and three Sentinels watching them as `name`. */
export class SentinelGroupUnderTest {
  readonly name = "ntf-primary";
  readonly data: Node[];
  readonly sentinels: Node[];
  readonly #dir: string;

  private constructor(data: Node[], sentinels: Node[], dir: string) {
    this.data = data;
    this.sentinels = sentinels;
    this.#dir = dir;
  }

  static async start(): Promise<SentinelGroupUnderTest> {
    const dir = mkdtempSync(join(tmpdir(), "redis-sentinel-"));
    const data: Node[] = [];
    const sentinels: Node[] = [];
    const group = new SentinelGroupUnderTest(data, sentinels, dir);
    try {
      const primaryPort = await freeNodePort();
      data.push(new Node(primaryPort, baseArgs(primaryPort, dir)));
      const replicaPort = await freeNodePort();
      data.push(
        new Node(replicaPort, [
          ...baseArgs(replicaPort, dir),
          "--replicaof",
          "127.0.0.1",
          String(primaryPort),
        ]),
      );
      for (const node of data) await until(() => answers(node), 10_000, `redis ${node.port}`);
      await until(
        async () => (field((await data[1]?.info()) ?? "", "master_link_status") === "up" ? true : undefined),
        15_000,
        "the replica to sync",
      );
      for (let i = 0; i < 3; i++) {
        const port = await freeNodePort();
        const conf = join(dir, `sentinel-${port}.conf`);
        writeFileSync(
          conf,
          [
            `port ${port}`,
            "bind 127.0.0.1",
            `dir ${dir}`,
            `sentinel monitor ${group.name} 127.0.0.1 ${primaryPort} 2`,
            `sentinel down-after-milliseconds ${group.name} 1000`,
            `sentinel failover-timeout ${group.name} 10000`,
            `sentinel parallel-syncs ${group.name} 1`,
            "",
          ].join("\n"),
        );
        sentinels.push(new Node(port, [conf, "--sentinel", "--loglevel", "warning"]));
      }
      for (const node of sentinels) await until(() => answers(node), 10_000, `sentinel ${node.port}`);
      // Each Sentinel knows the replica and the two other Sentinels: a failover can be agreed.
      await until(
        async () => {
          for (const sentinel of sentinels) {
            const redis = sentinel.client();
            try {
              const replicas = (await redis.call("SENTINEL", "REPLICAS", group.name)) as unknown[];
              const peers = (await redis.call("SENTINEL", "SENTINELS", group.name)) as unknown[];
              if (replicas.length < 1 || peers.length < 2) return undefined;
            } finally {
              redis.disconnect();
            }
          }
          return true;
        },
        30_000,
        "the Sentinels to know the replica and each other",
      );
      return group;
    } catch (error) {
      await group.close();
      throw error;
    }
  }

  /** `host:port,…` of the Sentinels, for REDIS_SENTINELS. */
  get addresses(): string {
    return this.sentinels.map((node) => node.address).join(",");
  }

  /** The port the Sentinels name as the primary now. */
  async primaryPort(): Promise<number> {
    const sentinel = this.sentinels.find((n) => n.running);
    if (!sentinel) throw new Error("no Sentinel runs");
    const redis = sentinel.client();
    try {
      const [, port] = (await redis.call("SENTINEL", "GET-MASTER-ADDR-BY-NAME", this.name)) as [
        string,
        string,
      ];
      return Number(port);
    } finally {
      redis.disconnect();
    }
  }

  /**
   * Moves the primary to the replica: `kill` SIGKILLs the primary and lets the Sentinels agree it
   * is down; otherwise `SENTINEL FAILOVER` (the old primary becomes a replica, answering READONLY).
   * Resolves once the new primary takes writes.
   */
  async failover(how: "kill" | "command", timeoutMs = 40_000): Promise<void> {
    const before = await this.primaryPort();
    if (how === "kill") {
      await this.data.find((n) => n.port === before)?.kill();
    } else {
      const redis = this.sentinels[0]?.client();
      try {
        await redis?.call("SENTINEL", "FAILOVER", this.name);
      } finally {
        redis?.disconnect();
      }
    }
    await until(
      async () => {
        const now = await this.primaryPort();
        if (now === before) return undefined;
        const node = this.data.find((n) => n.port === now);
        return node && field(await node.info(), "role") === "master" ? true : undefined;
      },
      timeoutMs,
      "the Sentinels to promote the replica",
    );
  }

  async close(): Promise<void> {
    await Promise.all([...this.sentinels, ...this.data].map((node) => node.kill()));
    rmSync(this.#dir, { recursive: true, force: true });
  }
}

/**
 * A Redis that speaks TLS only, its certificate (for 127.0.0.1) signed by a CA of the test's own:
 * `caFile` is what REDIS_TLS_CA_FILE names.
 */
export class TlsRedisUnderTest {
  readonly #node: Node;
  readonly #dir: string;
  readonly caFile: string;

  private constructor(node: Node, dir: string, caFile: string) {
    this.#node = node;
    this.#dir = dir;
    this.caFile = caFile;
  }

  static async start(): Promise<TlsRedisUnderTest> {
    const dir = mkdtempSync(join(tmpdir(), "redis-tls-"));
    const file = (name: string) => join(dir, name);
    const ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"];
    await run("openssl", [
      "req",
      "-x509",
      ...ec,
      "-keyout",
      file("ca.key"),
      "-out",
      file("ca.pem"),
      "-days",
      "1",
      "-subj",
      "/CN=test-ca",
    ]);
    await run("openssl", [
      "req",
      ...ec,
      "-keyout",
      file("server.key"),
      "-out",
      file("server.csr"),
      "-subj",
      "/CN=127.0.0.1",
    ]);
    writeFileSync(file("ext.cnf"), "subjectAltName=IP:127.0.0.1\n");
    await run("openssl", [
      "x509",
      "-req",
      "-in",
      file("server.csr"),
      "-CA",
      file("ca.pem"),
      "-CAkey",
      file("ca.key"),
      "-CAcreateserial",
      "-out",
      file("server.pem"),
      "-days",
      "1",
      "-extfile",
      file("ext.cnf"),
    ]);
    const port = await freeNodePort();
    const node = new Node(port, [
      ...baseArgs(0, dir),
      "--tls-port",
      String(port),
      "--tls-cert-file",
      file("server.pem"),
      "--tls-key-file",
      file("server.key"),
      "--tls-ca-cert-file",
      file("ca.pem"),
      "--tls-auth-clients",
      "no",
    ]);
    const server = new TlsRedisUnderTest(node, dir, file("ca.pem"));
    try {
      await until(
        async () => {
          const redis = new Redis(port, "127.0.0.1", {
            tls: { ca: readFileSync(file("ca.pem"), "utf8") },
            maxRetriesPerRequest: 0,
            retryStrategy: () => null,
          });
          redis.on("error", () => {});
          try {
            return (await redis.ping()) === "PONG" ? true : undefined;
          } finally {
            redis.disconnect();
          }
        },
        10_000,
        "the TLS Redis",
      );
      return server;
    } catch (error) {
      await server.close();
      throw error;
    }
  }

  /** `rediss://127.0.0.1:<port>`. */
  get url(): string {
    return `rediss://127.0.0.1:${this.#node.port}`;
  }

  async close(): Promise<void> {
    await this.#node.kill();
    rmSync(this.#dir, { recursive: true, force: true });
  }
}
