import type { DeliveryOutcome } from "../../domain/delivery-outcome.js";
import type { BreakerState } from "./breaker.js";

/** What every channel's provider is handed: its own message, plus which attempt this is. */
export interface ProviderMessage {
  messageId: string;
  /** 1 for the first attempt. */
  attempt: number;
}

/** What an attempt's call tells a provider besides the message (a provider list reads it). */
export interface SendOptions {
  /**
   * The providers (accounts) the message's previous attempt failed on, as its history names them:
   * a provider list tries them last this time, so a retry after a time-out goes to another one.
   */
  triedLast?: readonly string[];
  /** Epoch milliseconds (the message's time to live): a provider list calls no further provider after it. */
  deadline?: number;
  /**
   * The call this attempt's list reserved before the attempt was recorded ({@link Provider.reserve}):
   * its first provider goes through on it, whatever its breaker says by then.
   */
  reservation?: ProviderReservation;
}

/**
 * A call a provider list promised to one attempt before the attempt started (docs/decisions/0046):
 * the breaker of the first provider the attempt will go to has let it through already.
 */
export interface ProviderReservation {
  /** The account the attempt goes to first. */
  readonly provider: string;
  /** Gives the call back unused (the attempt did not start); once the attempt used it, nothing. */
  release(): void;
}

/** One account's circuit breaker, as /metrics reports it. */
export interface BreakerReading {
  provider: string;
  state: BreakerState;
}

/**
 * A way to hand one channel's message (`M`: an SMS, a rendered e-mail, an encrypted push) to
 * the outside world. `send` never throws: every result, failures included, comes back as a
 * {@link DeliveryOutcome} whose error says whether to retry.
 *
 * A provider list (`SMS_PROVIDERS`, `EMAIL_PROVIDERS`: src/channels/providers/provider-list.ts)
 * is a provider too, with the optional methods below; a single provider has none of them.
 */
export interface Provider<M extends ProviderMessage> {
  /** The account's name: `twilio`, `smtp`, `simulator`, or in a provider list `twilio:backup`. */
  readonly name: string;
  /** The longest one call may take (its time-out); none for a simulator, which answers at once. */
  readonly timeoutMs?: number;
  send(message: M, options?: SendOptions): Promise<DeliveryOutcome>;
  /** Releases pooled connections at shutdown. */
  close?(): Promise<void>;
  /** A provider list: the list an organization's messages go through (its own, or the default). */
  forOrganization?(organizationId: string): Provider<M>;
  /**
   * A provider list: how long until one of its providers may be called (0: now); while every
   * breaker is open, a delivery waits this long rather than spending an attempt on nobody.
   */
  readyInMs?(): number;
  /**
   * A provider list: reserves the call an attempt will make first (the first provider, in the
   * attempt's order, whose breaker lets it through), or none when every breaker refuses. The worker
   * reserves before it records an attempt, so no attempt is counted when no provider can be called.
   */
  reserve?(triedLast?: readonly string[]): ProviderReservation | undefined;
  /** A provider list: every account's circuit breaker (those of the organizations' lists too). */
  breakers?(): readonly BreakerReading[];
}

/** What a channel's provider factory takes besides the config. */
export interface ProviderOptions {
  /** How long the simulators' rate-limited cases ask to wait (tests shorten it). */
  simulatorRateLimitRetryAfterMs?: number;
  /** The provider lists' wall clock (epoch milliseconds): the messages' deadlines. */
  now?: () => number;
  /** The provider lists' monotonic clock (default `performance.now`): the breakers' cool-downs. */
  clock?: () => number;
  /** Told when a provider list moves an attempt from one provider to the next. */
  onFailover?(channel: string, from: string, to: string): void;
  /** Told when an account's circuit breaker changes state. */
  onBreakerChange?(channel: string, provider: string, from: BreakerState, to: BreakerState): void;
}
