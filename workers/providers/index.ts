import { type Config, ConfigError } from "../../src/config.js";
import { SimulatorSmsProvider } from "./simulator.js";
import type { SmsProvider } from "./sms-provider.js";
import { TwilioSmsProvider } from "./twilio.js";

export type SmsProviderConfig = Pick<
  Config,
  "SMS_PROVIDER" | "TWILIO_ACCOUNT_SID" | "TWILIO_AUTH_TOKEN" | "TWILIO_BASE_URL" | "TWILIO_TIMEOUT_MS"
>;

/**
 * The provider `SMS_PROVIDER` names. Throws a {@link ConfigError} if Twilio is chosen without
 * credentials (`loadConfig` already refuses that; this guards hand-built configs).
 */
export function createSmsProvider(
  config: SmsProviderConfig,
  options: { simulatorRateLimitRetryAfterMs?: number } = {},
): SmsProvider {
  switch (config.SMS_PROVIDER) {
    case "simulator":
      return new SimulatorSmsProvider({ rateLimitRetryAfterMs: options.simulatorRateLimitRetryAfterMs });
    case "twilio": {
      if (!config.TWILIO_ACCOUNT_SID || !config.TWILIO_AUTH_TOKEN) {
        throw new ConfigError("TWILIO_ACCOUNT_SID / TWILIO_AUTH_TOKEN: required when SMS_PROVIDER=twilio");
      }
      return new TwilioSmsProvider({
        accountSid: config.TWILIO_ACCOUNT_SID,
        authToken: config.TWILIO_AUTH_TOKEN,
        baseUrl: config.TWILIO_BASE_URL,
        timeoutMs: config.TWILIO_TIMEOUT_MS,
      });
    }
  }
  // Unreachable for a typed config; guards one assembled by hand from untyped input.
  throw new ConfigError(`SMS_PROVIDER: unknown provider ${JSON.stringify(config.SMS_PROVIDER)}`);
}
