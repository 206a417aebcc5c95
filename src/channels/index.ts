import type { Database } from "../../db/client.js";
import type { MessageContent } from "../domain/events.js";
import type { Config } from "../runtime/config.js";
import type { Channel, ChannelName, Prepared } from "./channel.js";
import { email } from "./email/index.js";
import type { Provider, ProviderMessage, ProviderOptions } from "./providers/provider.js";
import { push } from "./push/index.js";
import { sms } from "./sms/index.js";

/**
 * Every channel, in the order the API documents their send endpoints. A new channel is a folder
 * beside these, whose `index.ts` exports its {@link Channel}, and one line here.
 */
export const channels = [sms, email, push] as const;

type Listed = (typeof channels)[number];

/** One provider per channel, as configured. */
export type Providers = {
  [C in Listed as C["name"]]: C extends Channel<ChannelName, infer _P, infer M> ? Provider<M> : never;
};

const byName = new Map<string, Channel>(channels.map((channel) => [channel.name, channel]));

/**
 * The channel named `name`. Typed by the list, so code that passes a channel the domain knows
 * (`message.channel`) fails to compile while that channel is missing from the list.
 */
export function channelNamed(name: Listed["name"]): Channel {
  const channel = byName.get(name);
  if (!channel) throw new Error(`unknown channel ${JSON.stringify(name)}`);
  return channel;
}

/**
 * The providers `SMS_PROVIDER`, `EMAIL_PROVIDER` and `PUSH_PROVIDER` name (or the lists of
 * `SMS_PROVIDERS` and `EMAIL_PROVIDERS`). Each channel loads its provider code here, the first
 * time: only the worker calls this.
 */
export async function createProviders(config: Config, options: ProviderOptions = {}): Promise<Providers> {
  const created = await Promise.all(
    channels.map(async (channel) => [channel.name, await channel.createProvider(config, options)] as const),
  );
  return Object.fromEntries(created) as Providers;
}

/**
 * The provider a message goes through: its channel's, and with a provider list, its organization's
 * own list when it has one (docs/decisions/0046).
 */
export function providerFor(providers: Providers, message: MessageContent): Provider<ProviderMessage> {
  const provider: Provider<ProviderMessage> = providers[message.channel] as Provider<ProviderMessage>;
  return provider.forOrganization?.(message.organizationId) ?? provider;
}

/**
 * Gets a message ready for its channel's provider (see each channel's `prepare.ts`). Throws only
 * when the database does, or when the template sandbox cannot start its thread (both worth retrying).
 */
export function prepareDelivery(
  deps: {
    db: Database;
    providers: Providers;
    now: () => Date;
    isSuppressed?: (recipient: string) => boolean;
  },
  message: MessageContent,
): Promise<Prepared> | Prepared {
  return channelNamed(message.channel).prepare(message, {
    db: deps.db,
    provider: providerFor(deps.providers, message),
    now: deps.now,
    ...(deps.isSuppressed && { isSuppressed: deps.isSuppressed }),
  });
}
