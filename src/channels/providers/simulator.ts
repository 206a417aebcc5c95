import { createHash } from "node:crypto";
import type { DeliveryOutcome, FailureClass } from "../../domain/delivery-outcome.js";

/**
 * What every channel's simulator shares: a table of special recipients (numbers, addresses,
 * endpoints), each failing in a documented way on its first attempts, and a stable fake id for
 * everything else. Deterministic, so integrators and tests can exercise every outcome.
 */

/** How a simulator treats one special recipient. */
export interface SimulatedCase {
  /** One line for docs and test names, e.g. "rejected: invalid number". */
  description: string;
  class: FailureClass;
  code: string;
  /** Attempts 1..failingAttempts fail; later ones succeed. `Infinity` never succeeds. */
  failingAttempts: number;
  /** The failure carries the simulator's `rateLimitRetryAfterMs`, like an HTTP 429. */
  rateLimited?: boolean;
}

export interface SimulatorOptions {
  /** Retry-After reported by rate-limited cases; default 1000. */
  rateLimitRetryAfterMs?: number;
}

/** The outcome of one attempt: the special case's failure while it lasts, else success. */
export function simulatedOutcome(options: {
  provider: string;
  /** The special case this message meets, and what to call it in the message (e.g. the address). */
  special: { case: SimulatedCase; label?: string } | undefined;
  attempt: number;
  rateLimitRetryAfterMs: number;
  /** The provider's id for a success, from {@link simulatedDigest}. */
  successId: string;
}): DeliveryOutcome {
  const { provider, special, attempt } = options;
  if (special && attempt <= special.case.failingAttempts) {
    const { description, code, rateLimited } = special.case;
    const about = special.label ? `${special.label}: ${description}` : description;
    return {
      ok: false,
      provider,
      error: {
        class: special.case.class,
        code,
        message: `Simulator: ${about} (attempt ${attempt})`,
        ...(rateLimited ? { retryAfterMs: options.rateLimitRetryAfterMs } : {}),
      },
    };
  }
  return { ok: true, provider, providerMessageId: options.successId };
}

/** 32 hex characters, stable for a given message and attempt: the body of a simulated id. */
export function simulatedDigest(messageId: string, attempt: number): string {
  return createHash("sha256").update(`${messageId}:${attempt}`).digest("hex").slice(0, 32);
}
