import { createHash } from "node:crypto";
import type { DeliveryOutcome, FailureClass } from "../../../src/domain/delivery-outcome.js";
import type { SmsMessage, SmsProvider } from "./provider.js";

/** How the simulator treats one special recipient. */
export interface SimulatedRecipient {
  /** One line for docs and test names, e.g. "rejected: invalid number". */
  description: string;
  class: FailureClass;
  code: string;
  /** Attempts 1..failingAttempts fail; later ones succeed. `Infinity` never succeeds. */
  failingAttempts: number;
  /** The failure carries the simulator's `rateLimitRetryAfterMs`, like an HTTP 429. */
  rateLimited?: boolean;
}

/**
 * The simulator's special recipients (DESIGN.md §6). Any number not listed here succeeds on
 * the first attempt.
 */
export const SIMULATOR_RECIPIENTS = {
  "+15005550001": {
    description: "rejected: invalid number",
    class: "rejected",
    code: "invalid_number",
    failingAttempts: Number.POSITIVE_INFINITY,
  },
  "+15005550004": {
    description: "rejected: recipient opted out",
    class: "rejected",
    code: "opted_out",
    failingAttempts: Number.POSITIVE_INFINITY,
  },
  "+15005550009": {
    description: "rejected: not a mobile number",
    class: "rejected",
    code: "not_mobile",
    failingAttempts: Number.POSITIVE_INFINITY,
  },
  "+15005550500": {
    description: "transient failure on every attempt",
    class: "transient",
    code: "simulated_outage",
    failingAttempts: Number.POSITIVE_INFINITY,
  },
  "+15005550501": {
    description: "transient failure on the first attempt, then success",
    class: "transient",
    code: "simulated_outage",
    failingAttempts: 1,
  },
  "+15005550502": {
    description: "transient failure on the first two attempts, then success",
    class: "transient",
    code: "simulated_outage",
    failingAttempts: 2,
  },
  "+15005550429": {
    description: "provider rate limit (429) on the first attempt, then success",
    class: "transient",
    code: "rate_limited",
    failingAttempts: 1,
    rateLimited: true,
  },
} as const satisfies Record<string, SimulatedRecipient>;

export type SimulatorRecipientNumber = keyof typeof SIMULATOR_RECIPIENTS;

const recipients: Readonly<Record<string, SimulatedRecipient | undefined>> = SIMULATOR_RECIPIENTS;

export interface SimulatorSmsProviderOptions {
  /** Retry-After reported for the rate-limited recipient; default 1000. */
  rateLimitRetryAfterMs?: number;
}

/**
 * A deterministic sandbox standing in for a real provider: the outcome depends only on the
 * recipient and the attempt number (see {@link SIMULATOR_RECIPIENTS}), and nothing is sent.
 */
export class SimulatorSmsProvider implements SmsProvider {
  readonly name = "simulator";
  readonly #rateLimitRetryAfterMs: number;

  constructor(options: SimulatorSmsProviderOptions = {}) {
    this.#rateLimitRetryAfterMs = options.rateLimitRetryAfterMs ?? 1000;
  }

  async send(message: SmsMessage): Promise<DeliveryOutcome> {
    const special = recipients[message.to];
    if (special && message.attempt <= special.failingAttempts) {
      return {
        ok: false,
        provider: this.name,
        error: {
          class: special.class,
          code: special.code,
          message: `Simulator: ${special.description} (attempt ${message.attempt})`,
          ...(special.rateLimited ? { retryAfterMs: this.#rateLimitRetryAfterMs } : {}),
        },
      };
    }
    return { ok: true, provider: this.name, providerMessageId: simulatedMessageId(message) };
  }
}

/** Same shape as a Twilio sid (prefix + 32 hex), stable for a given message and attempt. */
function simulatedMessageId(message: SmsMessage): string {
  const digest = createHash("sha256").update(`${message.messageId}:${message.attempt}`).digest("hex");
  return `SIM${digest.slice(0, 32)}`;
}
