/**
 * A circuit breaker for one provider account (docs/decisions/0046), in one worker process:
 *
 * - `closed`: every call goes through; a run of `failures` failures in a row (transient errors:
 *   connections refused or reset, time-outs, 5xx, 429) opens it. Any answer of the provider's
 *   (a success, a rejected recipient, a permanent error) ends the run.
 * - `open`: no call goes through for `cooldownMs`; then it is half-open.
 * - `half_open`: exactly one call goes through, the probe; while it is under way no other does.
 *   The probe's success closes the breaker, its failure opens it again for another cool-down, and
 *   a probe given back unused (the call was never made) lets the next call be the probe.
 *
 * Results of calls let through before the last change of state are ignored: a call that started
 * while the breaker was closed and fails after it opened does not prolong the cool-down, nor does
 * one that succeeds close it again. The clock is injected: a monotonic one (`performance.now`), so
 * a wall clock's jump (NTP, a resumed VM) neither ends a cool-down early nor stretches it.
 */

export const BREAKER_STATES = ["closed", "half_open", "open"] as const;
export type BreakerState = (typeof BREAKER_STATES)[number];

export interface BreakerOptions {
  /** Failures in a row that open the breaker (at least 1). */
  failures: number;
  /** How long it stays open before one probe is let through. */
  cooldownMs: number;
  /** Milliseconds on a monotonic clock (`performance.now`, or a test's own). */
  now: () => number;
  /** Told of every change of state, e.g. to log it; a hook that throws changes nothing here. */
  onChange?: (from: BreakerState, to: BreakerState) => void;
}

/** A call the breaker let through; its result goes back with {@link CircuitBreaker.settle}. */
export interface BreakerPermit {
  /** Whether this call is the half-open breaker's one probe. */
  readonly probe: boolean;
  readonly generation: number;
}

/** What came of a call: the provider answered, it failed (transiently), or it was never made. */
export type CallResult = "success" | "failure" | "unused";

export class CircuitBreaker {
  readonly #failures: number;
  readonly #cooldownMs: number;
  readonly #now: () => number;
  readonly #onChange: BreakerOptions["onChange"];
  #state: BreakerState = "closed";
  /** Failures in a row while closed. */
  #run = 0;
  #openedAt = 0;
  #probing = false;
  /** Bumped at every change of state: permits of an older generation are ignored. */
  #generation = 0;

  constructor(options: BreakerOptions) {
    if (!Number.isInteger(options.failures) || options.failures < 1)
      throw new RangeError("a breaker opens after at least 1 failure");
    if (!(options.cooldownMs >= 0)) throw new RangeError("a breaker's cool-down cannot be negative");
    this.#failures = options.failures;
    this.#cooldownMs = options.cooldownMs;
    this.#now = options.now;
    this.#onChange = options.onChange;
  }

  /** The state now: an open breaker whose cool-down is over reads as half-open. */
  get state(): BreakerState {
    if (this.#state === "open" && this.#cooledDown()) return "half_open";
    return this.#state;
  }

  /**
   * How long until a call may be let through: 0 now; the rest of the cool-down while open;
   * `Infinity` while the half-open breaker's probe is under way (until it answers).
   */
  readyInMs(): number {
    switch (this.state) {
      case "closed":
        return 0;
      case "open":
        return Math.max(0, this.#openedAt + this.#cooldownMs - this.#now());
      case "half_open":
        return this.#probing ? Number.POSITIVE_INFINITY : 0;
      default: {
        const never: never = this.state;
        throw new Error(`unknown breaker state ${String(never)}`);
      }
    }
  }

  /** Lets one call through, or none (undefined) while open or while the probe is under way. */
  acquire(): BreakerPermit | undefined {
    if (this.#state === "closed") return { probe: false, generation: this.#generation };
    if (this.#state === "open") {
      if (!this.#cooledDown()) return undefined;
      this.#moveTo("half_open");
    }
    if (this.#probing) return undefined;
    this.#probing = true;
    return { probe: true, generation: this.#generation };
  }

  /** Records what came of a call the breaker let through. */
  settle(permit: BreakerPermit, result: CallResult): void {
    if (permit.generation !== this.#generation) return;
    if (permit.probe) {
      this.#probing = false;
      if (result === "success") this.#moveTo("closed");
      else if (result === "failure") this.#open();
      return;
    }
    if (result === "success") this.#run = 0;
    else if (result === "failure" && ++this.#run >= this.#failures) this.#open();
  }

  #cooledDown(): boolean {
    return this.#now() - this.#openedAt >= this.#cooldownMs;
  }

  #open(): void {
    this.#openedAt = this.#now();
    this.#moveTo("open");
  }

  #moveTo(state: BreakerState): void {
    const from = this.#state;
    this.#state = state;
    this.#generation++;
    this.#run = 0;
    this.#probing = false;
    if (from === state) return;
    try {
      this.#onChange?.(from, state);
    } catch {
      // A log or metrics hook that fails must not leave the breaker half-changed (a probe never
      // handed out, a permit never settled): the state above is already whole.
    }
  }
}
