import type { Config } from "../runtime/config.js";
import { createEmailProvider } from "./email/providers/index.js";
import type { Providers } from "./prepare.js";
import type { ProviderOptions } from "./providers/provider.js";
import { createPushProvider } from "./push/providers/index.js";
import { createSmsProvider } from "./sms/providers/index.js";

/** The providers `SMS_PROVIDER`, `EMAIL_PROVIDER` and `PUSH_PROVIDER` name. */
export function createProviders(config: Config, options: ProviderOptions = {}): Providers {
  return {
    sms: createSmsProvider(config, options),
    email: createEmailProvider(config, options),
    push: createPushProvider(config, options),
  };
}
