import type { Config } from "../../../runtime/config.js";
import type { SmtpAccount } from "../../../runtime/provider-accounts.js";
import { listedProviders, providerFactory, requiredSettings } from "../../providers/factory.js";
import type { ProviderOptions } from "../../providers/provider.js";
import type { EmailMessage, EmailProvider } from "./provider.js";
import { SimulatorEmailProvider } from "./simulator.js";
import { SmtpEmailProvider } from "./smtp.js";

/** The provider `EMAIL_PROVIDER` names. */
const createSingleEmailProvider = providerFactory<Config, "EMAIL_PROVIDER", EmailMessage>(
  "EMAIL_PROVIDER",
  SimulatorEmailProvider,
  {
    smtp(config, chosen) {
      const [host] = requiredSettings(config, ["SMTP_HOST"], chosen);
      return smtpProvider(config, {
        kind: "smtp",
        name: "smtp",
        host,
        port: config.SMTP_PORT,
        secure: config.SMTP_SECURE,
        requireTls: config.SMTP_REQUIRE_TLS,
        user: config.SMTP_USER,
        password: config.SMTP_PASSWORD,
        rejectUnauthorized: config.SMTP_TLS_REJECT_UNAUTHORIZED,
        timeoutMs: config.SMTP_TIMEOUT_MS,
        poolSize: config.SMTP_POOL_SIZE,
      });
    },
  },
);

/** The provider `EMAIL_PROVIDER` names, or the list `EMAIL_PROVIDERS` gives (docs/decisions/0046). */
export function createEmailProvider(config: Config, options: ProviderOptions = {}): EmailProvider {
  const lists = config.EMAIL_PROVIDERS;
  if (!lists) return createSingleEmailProvider(config, options);
  return listedProviders("email", lists, config, options, (account) =>
    account.kind === "smtp"
      ? smtpProvider(config, account)
      : new SimulatorEmailProvider({
          name: account.name,
          rateLimitRetryAfterMs: options.simulatorRateLimitRetryAfterMs,
        }),
  );
}

/** One SMTP server's provider: pooled, with the return path of BOUNCE_DOMAIN when set. */
function smtpProvider(config: Config, account: SmtpAccount): SmtpEmailProvider {
  return new SmtpEmailProvider({
    name: account.name,
    host: account.host,
    port: account.port,
    secure: account.secure,
    requireTls: account.requireTls,
    user: account.user,
    password: account.password,
    rejectUnauthorized: account.rejectUnauthorized,
    timeoutMs: account.timeoutMs,
    pool: true,
    maxConnections: account.poolSize,
    ...(config.BOUNCE_DOMAIN && {
      returnPath: { domain: config.BOUNCE_DOMAIN, localPart: config.BOUNCE_LOCAL_PART },
    }),
  });
}
