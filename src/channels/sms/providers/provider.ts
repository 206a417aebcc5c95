import type { DeliveryOutcome } from "../../../domain/delivery-outcome.js";

export interface SmsMessage {
  messageId: string;
  /** E.164 recipient. */
  to: string;
  /** Alphanumeric sender id, short code or E.164 number. */
  from: string;
  body: string;
  /** 1 for the first attempt. */
  attempt: number;
}

/**
 * A way to hand an SMS to the outside world. `send` never throws: every result, failures
 * included, comes back as a {@link DeliveryOutcome} whose error says whether to retry.
 */
export interface SmsProvider {
  readonly name: string;
  send(message: SmsMessage): Promise<DeliveryOutcome>;
}
