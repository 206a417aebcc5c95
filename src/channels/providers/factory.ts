import { type Config, ConfigError } from "../../runtime/config.js";
import type { ProviderLists } from "../../runtime/provider-accounts.js";
import type { Provider, ProviderMessage, ProviderOptions } from "./provider.js";
import { providerList } from "./provider-list.js";
import type { SimulatorOptions } from "./simulator.js";

/**
 * The real providers a setting can name besides `simulator`, each built from the config; `chosen`
 * says how it was chosen (e.g. "SMS_PROVIDER=twilio"), for {@link requiredSettings}.
 */
type RealProviders<C, S extends keyof C, M extends ProviderMessage> = {
  [Name in Exclude<C[S] & string, "simulator">]: (config: C, chosen: string) => Provider<M>;
};

/**
 * A channel's provider factory: the setting `setting` (e.g. `SMS_PROVIDER`) names the channel's
 * simulator or one of its real providers. A name it does not know is a {@link ConfigError}:
 * unreachable for a typed config, this guards one assembled by hand from untyped input.
 */
export function providerFactory<C, S extends keyof C & string, M extends ProviderMessage>(
  setting: S,
  Simulator: new (options: SimulatorOptions) => Provider<M>,
  real: RealProviders<C, S, M>,
): (config: C, options?: ProviderOptions) => Provider<M> {
  const makers: Readonly<Record<string, ((config: C, chosen: string) => Provider<M>) | undefined>> = real;
  return (config, options = {}) => {
    const name = config[setting];
    if (name === "simulator")
      return new Simulator({ rateLimitRetryAfterMs: options.simulatorRateLimitRetryAfterMs });
    const make = typeof name === "string" && Object.hasOwn(makers, name) ? makers[name] : undefined;
    if (!make) throw new ConfigError(`${setting}: unknown provider ${JSON.stringify(name)}`);
    return make(config, `${setting}=${name}`);
  };
}

/**
 * The settings a provider cannot run without, or a {@link ConfigError} naming them all
 * (`loadConfig` already refuses such a config; this guards hand-built ones).
 */
export function requiredSettings<C, const K extends readonly (keyof C & string)[]>(
  config: C,
  names: K,
  chosen: string,
): { [I in keyof K]: NonNullable<C[K[I]]> } {
  const values = names.map((name) => config[name]);
  if (values.some((value) => value === undefined || value === null || value === "")) {
    throw new ConfigError(`${names.join(" / ")}: required when ${chosen}`);
  }
  return values as { [I in keyof K]: NonNullable<C[K[I]]> };
}

/** The breaker settings a provider list needs. */
export type BreakerSettings = Partial<
  Pick<Config, "PROVIDER_BREAKER_FAILURES" | "PROVIDER_BREAKER_COOLDOWN_MS">
>;

/**
 * A channel's provider list (`SMS_PROVIDERS`, docs/decisions/0046) from its resolved accounts:
 * `make` builds each account's provider, named as the account.
 */
export function listedProviders<A extends { name: string }, M extends ProviderMessage>(
  channel: string,
  lists: ProviderLists<A>,
  config: BreakerSettings,
  options: ProviderOptions,
  make: (account: A) => Provider<M>,
): Provider<M> {
  const [failures, cooldownMs] = requiredSettings(
    config,
    ["PROVIDER_BREAKER_FAILURES", "PROVIDER_BREAKER_COOLDOWN_MS"],
    `${channel.toUpperCase()}_PROVIDERS is set`,
  );
  return providerList({
    channel,
    accounts: lists.accounts.map(make),
    order: lists.order,
    byOrganization: lists.byOrganization,
    breaker: { failures, cooldownMs },
    ...(options.now && { now: options.now }),
    ...(options.clock && { clock: options.clock }),
    ...(options.onFailover && { onFailover: options.onFailover }),
    ...(options.onBreakerChange && { onBreakerChange: options.onBreakerChange }),
  });
}
