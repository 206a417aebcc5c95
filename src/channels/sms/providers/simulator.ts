import type { DeliveryOutcome } from "../../../domain/delivery-outcome.js";
import {
  type SimulatedCase,
  type SimulatorOptions,
  simulatedDigest,
  simulatedOutcome,
} from "../../providers/simulator.js";
import type { SmsMessage, SmsProvider } from "./provider.js";

/** How the simulator treats one special recipient. */
export type SimulatedRecipient = SimulatedCase;

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

export type SimulatorSmsProviderOptions = SimulatorOptions;

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
    return simulatedOutcome({
      provider: this.name,
      special: special && { case: special },
      attempt: message.attempt,
      rateLimitRetryAfterMs: this.#rateLimitRetryAfterMs,
      // Shaped like a Twilio sid (prefix + 32 hex).
      successId: `SIM${simulatedDigest(message.messageId, message.attempt)}`,
    });
  }
}
