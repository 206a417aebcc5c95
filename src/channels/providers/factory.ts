import { ConfigError } from "../../runtime/config.js";
import type { Provider, ProviderMessage, ProviderOptions } from "./provider.js";
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
