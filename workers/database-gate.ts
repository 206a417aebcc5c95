import { isDatabaseUnavailable } from "../db/errors.js";
import type { Logger } from "../src/runtime/logger.js";

export interface DatabaseGateOptions {
  /** A cheap query; resolving means the database answers again. */
  probe: () => Promise<unknown>;
  probeIntervalMs: number;
  logger: Logger;
  /** Called once when an outage starts (e.g. pause the BullMQ worker). */
  onUnavailable?: () => void;
  /** Called once when the database answers again (e.g. resume the worker). */
  onAvailable?: () => void;
}

/**
 * Whether Postgres is reachable, as the worker sees it. The first "unavailable" error (refused,
 * reset, timed out, shutting down, read-only, out of resources, cancelled: see
 * {@link isDatabaseUnavailable}) closes the gate; from then on a probe runs every
 * `probeIntervalMs` until the database answers, which opens it again. (A probe only reads: on a
 * read-only standby or a full disk it answers, the gate opens, and the next write closes it again,
 * so jobs keep being handed back a probe interval at a time without counting an attempt.)
 * While it is closed the worker takes no jobs, hands back the ones it holds without counting a
 * delivery attempt, and holds on to provider outcomes it could not record yet.
 */
export class DatabaseGate {
  readonly #options: DatabaseGateOptions;
  #available = true;
  #closed = false;
  #timer: NodeJS.Timeout | undefined;
  readonly #waiters = new Set<(available: boolean) => void>();

  constructor(options: DatabaseGateOptions) {
    this.#options = options;
  }

  get available(): boolean {
    return this.#available;
  }

  /** How long a job handed back during an outage waits before it is due again. */
  get retryDelayMs(): number {
    return this.#options.probeIntervalMs;
  }

  /**
   * Tells the gate about an error from a database call. Returns true when the error means the
   * database is unreachable (the gate is then closed, if it was open); false for any other error.
   */
  reportFailure(error: unknown): boolean {
    if (!isDatabaseUnavailable(error)) return false;
    if (this.#available && !this.#closed) {
      this.#available = false;
      this.#options.logger.warn(
        { err: error },
        "database unreachable: pausing the delivery worker until it answers again",
      );
      this.#options.onUnavailable?.();
      this.#scheduleProbe();
    }
    return true;
  }

  /** Resolves true once the database answers, false after `timeoutMs` or when the gate is closed for good. */
  waitUntilAvailable(timeoutMs: number): Promise<boolean> {
    // Closed first: at shutdown the gate may still say "available", and a caller holding an
    // outcome would then retry its failing write in a tight loop until the shutdown deadline.
    if (this.#closed) return Promise.resolve(false);
    if (this.#available) return Promise.resolve(true);
    return this.#wait(timeoutMs, false);
  }

  /**
   * Waits `ms` before a retry after an error that did not close the gate. Resolves true then (or
   * when a probe finds the database answering), false at once when the gate is closed for good
   * (shutdown), so nothing is held past it.
   */
  backOff(ms: number): Promise<boolean> {
    if (this.#closed) return Promise.resolve(false);
    return this.#wait(ms, true);
  }

  /** Resolves with `atTimeout` after `ms`, or sooner with what a probe or close() reports. */
  #wait(ms: number, atTimeout: boolean): Promise<boolean> {
    return new Promise((resolve) => {
      const done = (answer: boolean) => {
        clearTimeout(timer);
        this.#waiters.delete(done);
        resolve(answer);
      };
      const timer = setTimeout(() => done(atTimeout), ms);
      this.#waiters.add(done);
    });
  }

  /** Stops probing and releases every waiter (shutdown). */
  close(): void {
    this.#closed = true;
    clearTimeout(this.#timer);
    for (const waiter of [...this.#waiters]) waiter(false);
  }

  #scheduleProbe(): void {
    if (this.#closed) return;
    this.#timer = setTimeout(() => void this.#probe(), this.#options.probeIntervalMs);
  }

  async #probe(): Promise<void> {
    try {
      await this.#options.probe();
    } catch {
      this.#scheduleProbe();
      return;
    }
    if (this.#closed) return;
    this.#available = true;
    this.#options.logger.info("database reachable again: resuming the delivery worker");
    this.#options.onAvailable?.();
    for (const waiter of [...this.#waiters]) waiter(true);
  }
}
