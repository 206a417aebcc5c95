import type { DeliveryOutcome } from "../../../domain/delivery-outcome.js";

export interface EmailAddress {
  email: string;
  name?: string;
}

/** A rendered e-mail, ready to hand over: the template and its merge variables are already applied. */
export interface EmailMessage {
  messageId: string;
  from: EmailAddress;
  to: EmailAddress[];
  cc: EmailAddress[];
  bcc: EmailAddress[];
  subject: string;
  html: string;
  text: string;
  /** 1 for the first attempt. */
  attempt: number;
}

/**
 * A way to hand an e-mail to the outside world. `send` never throws: every result, failures
 * included, comes back as a {@link DeliveryOutcome} whose error says whether to retry.
 */
export interface EmailProvider {
  readonly name: string;
  send(message: EmailMessage): Promise<DeliveryOutcome>;
  /** Releases pooled connections at shutdown. */
  close?(): Promise<void>;
}
