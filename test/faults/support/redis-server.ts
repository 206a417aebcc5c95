import { type ChildProcess, spawn } from "node:child_process";
import { connect } from "node:net";
import { tmpdir } from "node:os";
import { freePort } from "../../support/processes.js";
import { baseArgs } from "../../support/redis-topologies.js";

/**
 * A `redis-server` of the test's own on a free port, never the machine's shared one: no
 * persistence (`--save "" --appendonly no`), so a restart comes back empty, as when Redis
 * loses its data. Tests kill it with SIGKILL and start it again on the same port.
 */
export class RedisServer {
  readonly port: number;
  readonly #args: string[];
  #child: ChildProcess | undefined;
  #exited: Promise<void> = Promise.resolve();
  #output = "";

  private constructor(port: number, args: string[]) {
    this.port = port;
    this.#args = args;
  }

  /** `args`: more of redis-server's options (a cluster node, a replica, a password). */
  static async start(options: { maxmemoryPolicy?: string; args?: string[] } = {}): Promise<RedisServer> {
    const port = await freePort();
    const args = baseArgs(port, tmpdir());
    if (options.maxmemoryPolicy)
      args.push("--maxmemory", "256mb", "--maxmemory-policy", options.maxmemoryPolicy);
    if (options.args) args.push(...options.args);
    const server = new RedisServer(port, args);
    await server.restart();
    return server;
  }

  get url(): string {
    return `redis://127.0.0.1:${this.port}`;
  }

  get running(): boolean {
    return this.#child !== undefined;
  }

  output(): string {
    return this.#output;
  }

  /** Starts it (again, empty) on its port and resolves once it answers PING. */
  async restart(timeoutMs = 10_000): Promise<void> {
    if (this.#child) throw new Error("redis-server is already running");
    const child = spawn("redis-server", this.#args, { stdio: ["ignore", "pipe", "pipe"] });
    this.#child = child;
    child.stdout?.on("data", (chunk: Buffer) => {
      this.#output += chunk.toString();
    });
    child.stderr?.on("data", (chunk: Buffer) => {
      this.#output += chunk.toString();
    });
    this.#exited = new Promise((resolve) =>
      child.on("exit", () => {
        if (this.#child === child) this.#child = undefined;
        resolve();
      }),
    );
    const deadline = Date.now() + timeoutMs;
    while (!(await ping(this.port))) {
      if (!this.#child) throw new Error(`redis-server exited at start:\n${this.#output}`);
      if (Date.now() > deadline)
        throw new Error(`redis-server on ${this.port} did not answer within ${timeoutMs} ms`);
      await new Promise((resolve) => setTimeout(resolve, 25));
    }
  }

  /** SIGSTOP: connections stay open and nothing answers (a hung Redis). */
  freeze(): void {
    this.#child?.kill("SIGSTOP");
  }

  /** SIGCONT after {@link freeze}. */
  thaw(): void {
    this.#child?.kill("SIGCONT");
  }

  /** SIGKILL: every key is gone with it. Resolves once the process has exited. */
  async kill(): Promise<void> {
    this.#child?.kill("SIGKILL");
    await this.#exited;
  }
}

/** One PING over a raw socket: true on +PONG, or on NOAUTH from a server that wants a password. */
function ping(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect(port, "127.0.0.1");
    const done = (ok: boolean) => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(500, () => done(false));
    socket.on("error", () => done(false));
    socket.on("connect", () => socket.write("PING\r\n"));
    socket.on("data", (chunk: Buffer) => done(/^(\+PONG|-NOAUTH)/.test(chunk.toString())));
  });
}
