import { type SimulatedCase, type TableSimulator, tableSimulator } from "../../providers/simulator.js";
import type { EmailMessage } from "./provider.js";

/** Mail to this domain is never sent anywhere; `.test` is reserved for testing (RFC 2606). */
export const SIMULATOR_EMAIL_DOMAIN = "simulator.notify.test";

/**
 * The simulator's special addresses, all at {@link SIMULATOR_EMAIL_DOMAIN}. The first special
 * address among the recipients (to, then cc, then bcc) decides the outcome; a message with none
 * succeeds on the first attempt. Addresses match case-insensitively.
 */
export const SIMULATOR_MAILBOXES = {
  "rejected@simulator.notify.test": {
    description: "rejected: mailbox does not exist",
    class: "rejected",
    code: "mailbox_unavailable",
    failingAttempts: Number.POSITIVE_INFINITY,
  },
  "failed@simulator.notify.test": {
    description: "permanent failure: message refused",
    class: "permanent",
    code: "message_refused",
    failingAttempts: Number.POSITIVE_INFINITY,
  },
  "transient@simulator.notify.test": {
    description: "transient failure on every attempt",
    class: "transient",
    code: "simulated_outage",
    failingAttempts: Number.POSITIVE_INFINITY,
  },
  "transient-once@simulator.notify.test": {
    description: "transient failure on the first attempt, then success",
    class: "transient",
    code: "simulated_outage",
    failingAttempts: 1,
  },
  "transient-twice@simulator.notify.test": {
    description: "transient failure on the first two attempts, then success",
    class: "transient",
    code: "simulated_outage",
    failingAttempts: 2,
  },
  "rate-limited@simulator.notify.test": {
    description: "rate limited on the first attempt, then success",
    class: "transient",
    code: "rate_limited",
    failingAttempts: 1,
    rateLimited: true,
  },
} as const satisfies Record<string, SimulatedCase>;

/**
 * A deterministic sandbox standing in for a real mail server: the outcome depends only on the
 * recipients and the attempt number (see {@link SIMULATOR_MAILBOXES}), and nothing is sent.
 */
export const SimulatorEmailProvider = tableSimulator<EmailMessage>({
  cases: SIMULATOR_MAILBOXES,
  recipients: (message) =>
    [...message.to, ...message.cc, ...message.bcc].map((recipient) => recipient.email.trim().toLowerCase()),
  successId: (digest) => `SIM${digest}`,
});
export type SimulatorEmailProvider = TableSimulator<EmailMessage>;
