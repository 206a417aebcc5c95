import { connect, createServer, type Server, type Socket } from "node:net";

export type CutMode = "refuse" | "blackhole" | "freeze";

interface Pair {
  client: Socket;
  upstream?: Socket;
  /** The end of the last chunk, so a watched string split across chunks is still seen. */
  tail: string;
  /** What arrived while frozen, delivered on restore (as TCP delivers once a partition heals). */
  held: Array<() => void>;
}

/**
 * A TCP proxy in front of a real server (Postgres), for cutting the network without touching the
 * server: `cut("refuse")` destroys open connections and refuses new ones (the listener closes:
 * ECONNREFUSED); `cut("blackhole")` destroys open connections and accepts new ones without ever
 * answering (a partition: clients wait for their own time-out). `restore()` heals: the listener
 * is back, and blackholed connections still open are connected through, as when a partition ends.
 * `cut("freeze")` is a partition seen from open connections too: they stay open and nothing
 * passes either way (no close, no reset), and new connections are blackholed.
 * `latencyMs` delays every client → server chunk (slow database).
 */
export class TcpProxy {
  latencyMs = 0;
  readonly #target: { host: string; port: number };
  readonly #server: Server;
  readonly #pairs = new Set<Pair>();
  #mode: "open" | CutMode = "open";
  #port = 0;
  #listening = false;
  /** Connections accepted since start (for tests that want to know the proxy was used). */
  accepted = 0;
  readonly #watched = new Set<string>();
  readonly #seen = new Set<string>();

  private constructor(target: { host: string; port: number }) {
    this.#target = target;
    this.#server = createServer((client) => this.#accept(client));
  }

  static async start(target: { host: string; port: number }): Promise<TcpProxy> {
    const proxy = new TcpProxy(target);
    await proxy.#listen(0);
    return proxy;
  }

  get port(): number {
    return this.#port;
  }

  get mode(): "open" | CutMode {
    return this.#mode;
  }

  /**
   * Destroys every open connection and refuses or blackholes new ones until {@link restore}.
   * `reset`: the clients see a TCP reset (ECONNRESET, as when the server's host goes away)
   * rather than an orderly close.
   */
  async cut(mode: CutMode, options: { reset?: boolean } = {}): Promise<void> {
    this.#mode = mode;
    if (mode === "freeze") {
      if (!this.#listening) await this.#listen(this.#port);
      return;
    }
    for (const pair of [...this.#pairs]) {
      if (options.reset && !pair.client.destroyed) pair.client.resetAndDestroy();
      this.#destroy(pair);
    }
    if (mode === "refuse" && this.#listening) {
      this.#listening = false;
      await new Promise<void>((resolve) => this.#server.close(() => resolve()));
    } else if (mode === "blackhole" && !this.#listening) {
      await this.#listen(this.#port);
    }
  }

  /**
   * Looks for these strings in what clients send the server (a query's text or parameters), for
   * a test to know a request has reached the database. Returns the set of those seen so far.
   */
  watch(strings: readonly string[]): ReadonlySet<string> {
    for (const value of strings) this.#watched.add(value);
    return this.#seen;
  }

  async restore(): Promise<void> {
    this.#mode = "open";
    if (!this.#listening) await this.#listen(this.#port);
    for (const pair of [...this.#pairs]) {
      if (!pair.upstream) this.#connectUpstream(pair);
      for (const deliver of pair.held.splice(0)) deliver();
    }
  }

  async close(): Promise<void> {
    this.#mode = "refuse";
    for (const pair of [...this.#pairs]) this.#destroy(pair);
    if (this.#listening) {
      this.#listening = false;
      await new Promise<void>((resolve) => this.#server.close(() => resolve()));
    }
  }

  async #listen(port: number): Promise<void> {
    await new Promise<void>((resolve, reject) => {
      this.#server.once("error", reject);
      this.#server.listen(port, "127.0.0.1", () => {
        this.#server.off("error", reject);
        resolve();
      });
    });
    const address = this.#server.address();
    if (typeof address === "object" && address) this.#port = address.port;
    this.#listening = true;
  }

  #accept(client: Socket): void {
    this.accepted++;
    const pair: Pair = { client, tail: "", held: [] };
    this.#pairs.add(pair);
    client.on("error", () => this.#destroy(pair));
    client.on("close", () => this.#destroy(pair));
    if (this.#mode === "open") {
      this.#connectUpstream(pair);
    } else {
      // Blackholed: read nothing, answer nothing; the bytes wait in the socket until restore().
      client.pause();
    }
  }

  #connectUpstream(pair: Pair): void {
    const upstream = connect(this.#target.port, this.#target.host);
    pair.upstream = upstream;
    upstream.setNoDelay(true);
    pair.client.setNoDelay(true);
    upstream.on("error", () => this.#destroy(pair));
    upstream.on("close", () => this.#destroy(pair));
    upstream.on("data", (chunk: Buffer) => {
      const deliver = () => {
        if (!pair.client.destroyed) pair.client.write(chunk);
      };
      if (this.#mode === "freeze") pair.held.push(deliver);
      else deliver();
    });
    pair.client.on("data", (chunk: Buffer) => {
      if (this.#watched.size > 0) this.#scan(pair, chunk);
      const forward = () => {
        if (!upstream.destroyed) upstream.write(chunk);
      };
      if (this.#mode === "freeze") pair.held.push(forward);
      else if (this.latencyMs > 0) setTimeout(forward, this.latencyMs);
      else forward();
    });
    pair.client.resume();
  }

  #scan(pair: Pair, chunk: Buffer): void {
    const text = pair.tail + chunk.toString("latin1");
    for (const value of this.#watched) {
      if (text.includes(value)) {
        this.#seen.add(value);
        this.#watched.delete(value);
      }
    }
    pair.tail = text.slice(-256);
  }

  #destroy(pair: Pair): void {
    if (!this.#pairs.delete(pair)) return;
    pair.client.destroy();
    pair.upstream?.destroy();
  }
}
