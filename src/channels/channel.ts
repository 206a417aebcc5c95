import type { z } from "zod";
import type { Database } from "../../db/client.js";
import type { DeliveryError, DeliveryOutcome } from "../domain/delivery-outcome.js";
import type { MessageContent, RejectedReason } from "../domain/events.js";
import type { SenderClaim } from "../domain/senders.js";
import type { Config } from "../runtime/config.js";
import type { Provider, ProviderMessage, ProviderOptions, SendOptions } from "./providers/provider.js";
import type { SmsEncoding } from "./sms/content.js";

/**
 * What a channel is, for the code that handles every channel alike: the send route builds its
 * endpoint from it, the projection its record's columns, the worker its deliveries and providers.
 * Each channel is one folder (`sms/`, `email/`, `push/`) whose `index.ts` exports its `Channel`;
 * `index.ts` here lists them.
 */
export interface Channel<
  N extends ChannelName = ChannelName,
  P extends z.ZodType = z.ZodType,
  M extends ProviderMessage = ProviderMessage,
> {
  readonly name: N;
  /** "SMS", "Email", "Push": how the answers name it ("SMS notification accepted"). */
  readonly label: string;
  /** The send endpoint, as the OpenAPI document shows it. */
  readonly route: { path: string; summary: string; description: string };
  /** The send request's `payload`: the channel's request schema. */
  readonly payload: P;
  /** Why a valid request's content is refused all the same (a 400), when the configuration forbids it. */
  refuse?(content: ContentOf<N>, config: Config): string | undefined;
  /**
   * What the content is sent as, when that must be one of the organization's verified senders
   * (docs/decisions/0033); undefined when it is the platform's own (SMS_DEFAULT_SENDER, VAPID_SUBJECT).
   */
  sender?(content: ContentOf<N>, config: Config): SenderClaim | undefined;
  /** The message's channel content, from a validated payload. */
  content(payload: z.output<P>, config: Config): ContentOf<N>;
  /** The record's channel columns: `payload.message`, `payload.subject`, `payload.template_fields`. */
  record(message: MessageOf<N>): RecordColumns;
  /**
   * What acceptance measured of the content (an SMS's segments and encoding, docs/decisions/0043),
   * kept in clear beside it: the record's `segments` and `encoding`, and fields of the 202.
   * Undefined for a message accepted before they were measured; a channel that measures nothing
   * has no such method.
   */
  measures?(content: ContentOf<N>): Measures | undefined;
  /**
   * Gets a message ready for the channel's provider, or says why it never can be. Throws only
   * when the database does, or something else worth retrying.
   */
  prepare(message: MessageOf<N>, deps: PrepareDeps<M>): Promise<Prepared> | Prepared;
  /** The provider the config names. Loads provider code only when called: the web process never does. */
  createProvider(config: Config, options?: ProviderOptions): Promise<Provider<M>>;
}

export type ChannelName = MessageContent["channel"];

/** An accepted message of channel `N`. */
export type MessageOf<N extends ChannelName> = Extract<MessageContent, { channel: N }>;

/** What a send request says about its channel: the message minus what acceptance fills in. */
export type ContentOf<N extends ChannelName> = N extends ChannelName
  ? Omit<
      MessageOf<N>,
      | "id"
      | "organizationId"
      | "productId"
      | "priority"
      | "notificationType"
      | "retryEnabled"
      | "sendAt"
      | "expiresAt"
    >
  : never;

/** What acceptance measures of a content: only an SMS's are, so far. */
export interface Measures {
  /** How many segments (messages billed) the body is sent as. */
  segments: number;
  encoding: SmsEncoding;
}

/** The `messages` columns whose meaning depends on the channel. */
export interface RecordColumns {
  body: string | null;
  subject: string | null;
  templateFields: unknown;
}

export interface PrepareDeps<M extends ProviderMessage> {
  db: Database;
  /** The channel's provider, as configured: with a provider list, the message's organization's. */
  provider: Provider<M>;
  now: () => Date;
  /**
   * Recipients on the organization's suppression list (docs/decisions/0039): a channel whose
   * message names several (an e-mail) leaves these out; the domain has already rejected a message
   * whose every recipient is suppressed.
   */
  isSuppressed?: (recipient: string) => boolean;
}

/**
 * A message made ready for its provider, or the reason it never can be: an e-mail whose
 * template is missing or does not render is rejected before any provider is called.
 */
export type Prepared =
  | { ready: true; provider: string; send(attempt: number, options?: SendOptions): Promise<DeliveryOutcome> }
  | { ready: false; reason: RejectedReason; error: DeliveryError };

/** A message ready for `provider`: each attempt sends what `build` makes for it. */
export function readyFor<M extends ProviderMessage>(
  provider: Provider<M>,
  build: (attempt: number) => M,
): Prepared {
  return {
    ready: true,
    provider: provider.name,
    send: (attempt, options) => provider.send(build(attempt), options),
  };
}
