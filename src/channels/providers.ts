import { type Config, ConfigError } from "../runtime/config.js";
import type { EmailProvider } from "./email/providers/provider.js";
import { SimulatorEmailProvider } from "./email/providers/simulator.js";
import { SmtpEmailProvider } from "./email/providers/smtp.js";
import type { Providers } from "./prepare.js";
import type { PushProvider } from "./push/providers/provider.js";
import { SimulatorPushProvider } from "./push/providers/simulator.js";
import { WebPushProvider } from "./push/providers/webpush.js";
import type { SmsProvider } from "./sms/providers/provider.js";
import { SimulatorSmsProvider } from "./sms/providers/simulator.js";
import { TwilioSmsProvider } from "./sms/providers/twilio.js";

export type SmsProviderConfig = Pick<
  Config,
  "SMS_PROVIDER" | "TWILIO_ACCOUNT_SID" | "TWILIO_AUTH_TOKEN" | "TWILIO_BASE_URL" | "TWILIO_TIMEOUT_MS"
>;

/** How long the simulators' rate-limited cases ask to wait (tests shorten it). */
interface SimulatorOptions {
  simulatorRateLimitRetryAfterMs?: number;
}

/** The providers `SMS_PROVIDER`, `EMAIL_PROVIDER` and `PUSH_PROVIDER` name. */
export function createProviders(config: Config, options: SimulatorOptions = {}): Providers {
  return {
    sms: createSmsProvider(config, options),
    email: createEmailProvider(config, options),
    push: createPushProvider(config, options),
  };
}

/**
 * The provider `SMS_PROVIDER` names. Throws a {@link ConfigError} if Twilio is chosen without
 * credentials (`loadConfig` already refuses that; this guards hand-built configs).
 */
export function createSmsProvider(config: SmsProviderConfig, options: SimulatorOptions = {}): SmsProvider {
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

function createEmailProvider(config: Config, options: SimulatorOptions): EmailProvider {
  switch (config.EMAIL_PROVIDER) {
    case "simulator":
      return new SimulatorEmailProvider({ rateLimitRetryAfterMs: options.simulatorRateLimitRetryAfterMs });
    case "smtp":
      if (!config.SMTP_HOST) throw new ConfigError("SMTP_HOST: required when EMAIL_PROVIDER=smtp");
      return new SmtpEmailProvider({
        host: config.SMTP_HOST,
        port: config.SMTP_PORT,
        secure: config.SMTP_SECURE,
        requireTls: config.SMTP_REQUIRE_TLS,
        user: config.SMTP_USER,
        password: config.SMTP_PASSWORD,
        rejectUnauthorized: config.SMTP_TLS_REJECT_UNAUTHORIZED,
        timeoutMs: config.SMTP_TIMEOUT_MS,
        pool: true,
        maxConnections: config.SMTP_POOL_SIZE,
      });
  }
  throw new ConfigError(`EMAIL_PROVIDER: unknown provider ${JSON.stringify(config.EMAIL_PROVIDER)}`);
}

function createPushProvider(config: Config, options: SimulatorOptions): PushProvider {
  switch (config.PUSH_PROVIDER) {
    case "simulator":
      return new SimulatorPushProvider({ rateLimitRetryAfterMs: options.simulatorRateLimitRetryAfterMs });
    case "webpush":
      if (!config.VAPID_PUBLIC_KEY || !config.VAPID_PRIVATE_KEY) {
        throw new ConfigError("VAPID_PUBLIC_KEY / VAPID_PRIVATE_KEY: required when PUSH_PROVIDER=webpush");
      }
      return new WebPushProvider({
        vapidPublicKey: config.VAPID_PUBLIC_KEY,
        vapidPrivateKey: config.VAPID_PRIVATE_KEY,
        vapidSubject: config.VAPID_SUBJECT,
        timeoutMs: config.PUSH_TIMEOUT_MS,
      });
  }
  throw new ConfigError(`PUSH_PROVIDER: unknown provider ${JSON.stringify(config.PUSH_PROVIDER)}`);
}
