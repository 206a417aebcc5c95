import { type SimulatedCase, type TableSimulator, tableSimulator } from "../../providers/simulator.js";
import type { SmsMessage } from "./provider.js";

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
} as const satisfies Record<string, SimulatedCase>;

/**
 * A deterministic sandbox standing in for a real provider: the outcome depends only on the
 * recipient and the attempt number (see {@link SIMULATOR_RECIPIENTS}), and nothing is sent.
 */
export const SimulatorSmsProvider = tableSimulator<SmsMessage>({
  cases: SIMULATOR_RECIPIENTS,
  recipients: (message) => [message.to],
  // Shaped like a Twilio sid (prefix + 32 hex).
  successId: (digest) => `SIM${digest}`,
});
export type SimulatorSmsProvider = TableSimulator<SmsMessage>;
