import type { Config } from "../../../runtime/config.js";
import {
  type BreakerSettings,
  listedProviders,
  providerFactory,
  requiredSettings,
} from "../../providers/factory.js";
import type { ProviderOptions } from "../../providers/provider.js";
import type { SmsMessage, SmsProvider } from "./provider.js";
import { SimulatorSmsProvider } from "./simulator.js";
import { TwilioSmsProvider } from "./twilio.js";

export type SmsProviderConfig = Pick<
  Config,
  | "SMS_PROVIDER"
  | "TWILIO_ACCOUNT_SID"
  | "TWILIO_AUTH_TOKEN"
  | "TWILIO_BASE_URL"
  | "TWILIO_TIMEOUT_MS"
  | "PUBLIC_BASE_URL"
> &
  Partial<Pick<Config, "SMS_PROVIDERS">> &
  BreakerSettings;

/** The provider `SMS_PROVIDER` names. */
const createSingleSmsProvider = providerFactory<SmsProviderConfig, "SMS_PROVIDER", SmsMessage>(
  "SMS_PROVIDER",
  SimulatorSmsProvider,
  {
    twilio(config, chosen) {
      const [accountSid, authToken] = requiredSettings(
        config,
        ["TWILIO_ACCOUNT_SID", "TWILIO_AUTH_TOKEN"],
        chosen,
      );
      return new TwilioSmsProvider({
        accountSid,
        authToken,
        baseUrl: config.TWILIO_BASE_URL,
        timeoutMs: config.TWILIO_TIMEOUT_MS,
        publicBaseUrl: config.PUBLIC_BASE_URL,
      });
    },
  },
);

/** The provider `SMS_PROVIDER` names, or the list `SMS_PROVIDERS` gives (docs/decisions/0046). */
export function createSmsProvider(config: SmsProviderConfig, options: ProviderOptions = {}): SmsProvider {
  const lists = config.SMS_PROVIDERS;
  if (!lists) return createSingleSmsProvider(config, options);
  return listedProviders("sms", lists, config, options, (account) =>
    account.kind === "twilio"
      ? new TwilioSmsProvider({
          name: account.name,
          accountSid: account.accountSid,
          authToken: account.authToken,
          baseUrl: account.baseUrl,
          timeoutMs: account.timeoutMs,
          publicBaseUrl: config.PUBLIC_BASE_URL,
        })
      : new SimulatorSmsProvider({
          name: account.name,
          rateLimitRetryAfterMs: options.simulatorRateLimitRetryAfterMs,
        }),
  );
}
