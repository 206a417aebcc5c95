import type { DeliveryOutcome } from "../../domain/delivery-outcome.js";

/** What every channel's provider is handed: its own message, plus which attempt this is. */
export interface ProviderMessage {
  messageId: string;
  /** 1 for the first attempt. */
  attempt: number;
}

/**
 * A way to hand one channel's message (`M`: an SMS, a rendered e-mail, an encrypted push) to
 * the outside world. `send` never throws: every result, failures included, comes back as a
 * {@link DeliveryOutcome} whose error says whether to retry.
 */
export interface Provider<M extends ProviderMessage> {
  readonly name: string;
  /** The longest one call may take (its time-out); none for a simulator, which answers at once. */
  readonly timeoutMs?: number;
  send(message: M): Promise<DeliveryOutcome>;
  /** Releases pooled connections at shutdown. */
  close?(): Promise<void>;
}

/** What a channel's provider factory takes besides the config. */
export interface ProviderOptions {
  /** How long the simulators' rate-limited cases ask to wait (tests shorten it). */
  simulatorRateLimitRetryAfterMs?: number;
}
