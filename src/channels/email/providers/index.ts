import type { Config } from "../../../runtime/config.js";
import { providerFactory, requiredSettings } from "../../providers/factory.js";
import type { EmailMessage } from "./provider.js";
import { SimulatorEmailProvider } from "./simulator.js";
import { SmtpEmailProvider } from "./smtp.js";

/** The provider `EMAIL_PROVIDER` names. */
export const createEmailProvider = providerFactory<Config, "EMAIL_PROVIDER", EmailMessage>(
  "EMAIL_PROVIDER",
  SimulatorEmailProvider,
  {
    smtp(config, chosen) {
      const [host] = requiredSettings(config, ["SMTP_HOST"], chosen);
      return new SmtpEmailProvider({
        host,
        port: config.SMTP_PORT,
        secure: config.SMTP_SECURE,
        requireTls: config.SMTP_REQUIRE_TLS,
        user: config.SMTP_USER,
        password: config.SMTP_PASSWORD,
        rejectUnauthorized: config.SMTP_TLS_REJECT_UNAUTHORIZED,
        timeoutMs: config.SMTP_TIMEOUT_MS,
        pool: true,
        maxConnections: config.SMTP_POOL_SIZE,
        ...(config.BOUNCE_DOMAIN && {
          returnPath: { domain: config.BOUNCE_DOMAIN, localPart: config.BOUNCE_LOCAL_PART },
        }),
      });
    },
  },
);
