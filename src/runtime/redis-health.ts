import type { Logger } from "./logger.js";

/**
 * Redis answers that will not go away by retrying at once: a replica's `READONLY` (after a
 * failover demoted the node), `OOM` under `noeviction`, a Cluster node's `CROSSSLOT` / `MOVED`
 * (which a Cluster client follows itself: reaching us, they mean a cluster node used as one Redis),
 * a login refused after a reconnect, a node that cannot persist (`MISCONF`). Unlike a dropped
 * connection, each command fails the same way until someone changes something. Not here: a
 * cluster's `CLUSTERDOWN` and `TRYAGAIN`, which a failover or a resharding gives for seconds: the
 * job fails and is retried, no worker pauses every shard for one master's failover.
 */
const PERSISTENT_REDIS_ERRORS = {
  readonly: /^READONLY\b/,
  oom: /^OOM\b/,
  cluster: /^(CROSSSLOT|MOVED|ASK)\b/,
  auth: /^(NOAUTH|WRONGPASS|NOPERM)\b/,
  misconf: /^MISCONF\b/,
} as const;
export type PersistentRedisError = keyof typeof PERSISTENT_REDIS_ERRORS;

/** The kind of a persistent Redis error (also inside a failed Lua script's message), or undefined. */
export function persistentRedisError(error: unknown): PersistentRedisError | undefined {
  if (!(error instanceof Error)) return undefined;
  // Redis 7 puts a script's error code first ("READONLY … script: …, on @user_script:1."); Redis 6
  // wraps it: "ERR Error running script (call to f_…): @user_script:4: @user_script: 4: -READONLY …".
  const text = error.message.replace(/^ERR Error running script \([^)]*\): (@user_script:\s*\d+:\s*)+-?/, "");
  for (const [kind, pattern] of Object.entries(PERSISTENT_REDIS_ERRORS)) {
    if (pattern.test(text)) return kind as PersistentRedisError;
  }
  return undefined;
}

export interface RedisStall {
  kind: PersistentRedisError;
  /** The first error's text (its first line: no script, no command arguments). */
  reason: string;
  since: Date;
  errors: number;
}

export interface RedisHealthOptions {
  logger: Logger;
  /** A cheap write that fails while the stall lasts; resolving means Redis takes writes again. */
  probe: () => Promise<unknown>;
  onStalled?: (stall: RedisStall) => void;
  onRecovered?: () => void;
  /** Called for every persistent error, by kind (a metric). */
  onError?: (kind: PersistentRedisError) => void;
  firstProbeMs?: number;
  maxProbeMs?: number;
  /** While a stall lasts, one line this often with the count of errors since the last. */
  reportEveryMs?: number;
}

/**
 * Whether Redis takes the worker's writes. The first persistent error stalls it: one warning,
 * the work that needs Redis pauses (`onStalled`), and a probe runs with exponential backoff
 * (capped) until Redis takes a write again (`onRecovered`, one line). Meanwhile errors are only
 * counted, with one line a minute, so a Redis that answers wrongly never floods the logs or the
 * CPU (a Cluster node as REDIS_URL once gave 2,400 error lines a second per worker).
 */
export class RedisHealth {
  readonly #options: Required<Omit<RedisHealthOptions, "onStalled" | "onRecovered" | "onError">> &
    RedisHealthOptions;
  #stall: RedisStall | undefined;
  #unreported = 0;
  #probeTimer: NodeJS.Timeout | undefined;
  #reportTimer: NodeJS.Timeout | undefined;
  #closed = false;

  constructor(options: RedisHealthOptions) {
    this.#options = { firstProbeMs: 1000, maxProbeMs: 30_000, reportEveryMs: 60_000, ...options };
  }

  get stall(): RedisStall | undefined {
    return this.#stall;
  }

  /**
   * Tells it about an error from Redis. Returns true when the error is persistent (it is then
   * counted, and logged at most once a minute): the caller should not log it again.
   */
  report(error: unknown): boolean {
    const kind = persistentRedisError(error);
    if (!kind) return false;
    this.#options.onError?.(kind);
    if (this.#stall) {
      this.#stall.errors++;
      this.#unreported++;
      return true;
    }
    if (this.#closed) return true;
    const reason = (error as Error).message.split("\n")[0] ?? kind;
    this.#stall = { kind, reason, since: new Date(), errors: 1 };
    this.#options.logger.warn(
      { redisError: kind, reason },
      `Redis refuses the worker's writes (${kind}): deliveries are paused until it takes them again`,
    );
    this.#reportTimer = setInterval(() => {
      if (!this.#stall || this.#unreported === 0) return;
      this.#options.logger.warn(
        { redisError: this.#stall.kind, errors: this.#unreported, sinceSeconds: secondsSince(this.#stall) },
        "Redis still refuses the worker's writes",
      );
      this.#unreported = 0;
    }, this.#options.reportEveryMs);
    this.#reportTimer.unref();
    this.#options.onStalled?.(this.#stall);
    this.#scheduleProbe(this.#options.firstProbeMs);
    return true;
  }

  /** Stops probing (shutdown). */
  close(): void {
    this.#closed = true;
    clearTimeout(this.#probeTimer);
    clearInterval(this.#reportTimer);
  }

  #scheduleProbe(delayMs: number): void {
    if (this.#closed) return;
    this.#probeTimer = setTimeout(async () => {
      try {
        await this.#options.probe();
      } catch (error) {
        if (this.#stall && persistentRedisError(error)) {
          this.#stall.errors++;
          this.#unreported++;
        }
        this.#scheduleProbe(Math.min(delayMs * 2, this.#options.maxProbeMs));
        return;
      }
      // Closed meanwhile (shutdown): nothing may resume now.
      if (this.#closed) return;
      const stall = this.#stall;
      this.#stall = undefined;
      this.#unreported = 0;
      clearInterval(this.#reportTimer);
      this.#options.logger.info(
        {
          redisError: stall?.kind,
          errors: stall?.errors,
          sinceSeconds: secondsSince(stall),
        },
        "Redis takes the worker's writes again: deliveries resume",
      );
      this.#options.onRecovered?.();
    }, delayMs);
    this.#probeTimer.unref();
  }
}

function secondsSince(stall: RedisStall | undefined): number {
  return stall ? Math.round((Date.now() - stall.since.getTime()) / 1000) : 0;
}
