import type { DeliveryOutcome } from "../../../domain/delivery-outcome.js";
import {
  type SimulatedCase,
  type SimulatorOptions,
  simulatedDigest,
  simulatedOutcome,
} from "../../providers/simulator.js";
import type { EmailAddress, EmailMessage, EmailProvider } from "./provider.js";

/** Mail to this domain is never sent anywhere; `.test` is reserved for testing (RFC 2606). */
export const SIMULATOR_EMAIL_DOMAIN = "simulator.notify.test";

/** How the simulator treats one special address. */
export type SimulatedMailbox = SimulatedCase;

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
} as const satisfies Record<string, SimulatedMailbox>;

export type SimulatorMailboxAddress = keyof typeof SIMULATOR_MAILBOXES;

const mailboxes: ReadonlyMap<string, SimulatedMailbox> = new Map(Object.entries(SIMULATOR_MAILBOXES));

export type SimulatorEmailProviderOptions = SimulatorOptions;

/**
 * A deterministic sandbox standing in for a real mail server: the outcome depends only on the
 * recipients and the attempt number (see {@link SIMULATOR_MAILBOXES}), and nothing is sent.
 */
export class SimulatorEmailProvider implements EmailProvider {
  readonly name = "simulator";
  readonly #rateLimitRetryAfterMs: number;

  constructor(options: SimulatorEmailProviderOptions = {}) {
    this.#rateLimitRetryAfterMs = options.rateLimitRetryAfterMs ?? 1000;
  }

  async send(message: EmailMessage): Promise<DeliveryOutcome> {
    const special = firstSpecialMailbox([...message.to, ...message.cc, ...message.bcc]);
    return simulatedOutcome({
      provider: this.name,
      special: special && { case: special.mailbox, label: special.address },
      attempt: message.attempt,
      rateLimitRetryAfterMs: this.#rateLimitRetryAfterMs,
      successId: `SIM${simulatedDigest(message.messageId, message.attempt)}`,
    });
  }
}

function firstSpecialMailbox(
  recipients: EmailAddress[],
): { address: string; mailbox: SimulatedMailbox } | undefined {
  for (const recipient of recipients) {
    const address = recipient.email.trim().toLowerCase();
    const mailbox = mailboxes.get(address);
    if (mailbox) return { address, mailbox };
  }
  return undefined;
}
