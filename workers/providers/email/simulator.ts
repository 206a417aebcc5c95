import { createHash } from "node:crypto";
import type { DeliveryOutcome, FailureClass } from "../../../src/domain/delivery-outcome.js";
import type { EmailAddress, EmailMessage, EmailProvider } from "./provider.js";

/** Mail to this domain is never sent anywhere; `.test` is reserved for testing (RFC 2606). */
export const SIMULATOR_EMAIL_DOMAIN = "simulator.notify.test";

/** How the simulator treats one special address. */
export interface SimulatedMailbox {
  /** One line for docs and test names, e.g. "rejected: mailbox does not exist". */
  description: string;
  class: FailureClass;
  code: string;
  /** Attempts 1..failingAttempts fail; later ones succeed. `Infinity` never succeeds. */
  failingAttempts: number;
  /** The failure carries the simulator's `rateLimitRetryAfterMs`. */
  rateLimited?: boolean;
}

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

export interface SimulatorEmailProviderOptions {
  /** Retry-After reported for the rate-limited address; default 1000. */
  rateLimitRetryAfterMs?: number;
}

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
    if (special && message.attempt <= special.mailbox.failingAttempts) {
      return {
        ok: false,
        provider: this.name,
        error: {
          class: special.mailbox.class,
          code: special.mailbox.code,
          message: `Simulator: ${special.address}: ${special.mailbox.description} (attempt ${message.attempt})`,
          ...(special.mailbox.rateLimited ? { retryAfterMs: this.#rateLimitRetryAfterMs } : {}),
        },
      };
    }
    return { ok: true, provider: this.name, providerMessageId: simulatedMessageId(message) };
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

/** Same shape as the SMS simulator's ids (prefix + 32 hex), stable for a message and attempt. */
function simulatedMessageId(message: EmailMessage): string {
  const digest = createHash("sha256").update(`${message.messageId}:${message.attempt}`).digest("hex");
  return `SIM${digest.slice(0, 32)}`;
}
