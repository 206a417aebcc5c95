import type { Config } from "../../../runtime/config.js";
import { providerFactory, requiredSettings } from "../../providers/factory.js";
import type { SmsMessage } from "./provider.js";
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
>;

/** The provider `SMS_PROVIDER` names. */
export const createSmsProvider = providerFactory<SmsProviderConfig, "SMS_PROVIDER", SmsMessage>(
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
