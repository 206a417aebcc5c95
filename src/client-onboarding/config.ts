import { z } from "zod";
import { ConfigError } from "../runtime/config.js";

const bool = z.enum(["true", "false", "1", "0"]).transform((v) => v === "true" || v === "1");
const int = (min: number, max: number) => z.coerce.number().int().min(min).max(max);

/**
 * The client-onboarding service's settings, validated once at start-up. It reads only what it
 * needs, so the web process's settings (Redis, providers, tokens) are not required here.
 */
export const clientOnboardingConfigSchema = z.object({
  /** Unset means production: a development or test run has to say so (development relaxes the guards). */
  NODE_ENV: z.enum(["development", "test", "production"]).default("production"),
  PORT: int(0, 65535).default(3100),
  DATABASE_URL: z.url().default("postgres://postgres@127.0.0.1:5432/notifications"),
  DATABASE_POOL_SIZE: int(1, 200).default(5),
  /** Postgres cancels a statement of ours that runs longer. */
  DATABASE_STATEMENT_TIMEOUT_MS: int(100, 3_600_000).default(30_000),
  LOG_LEVEL: z.enum(["fatal", "error", "warn", "info", "debug", "trace", "silent"]).default("info"),
  /** Onboarding requests allowed per client IP in one window. */
  ONBOARD_RATE_LIMIT: int(1, 1_000_000).default(20),
  ONBOARD_RATE_WINDOW_MS: int(1000, 86_400_000).default(60_000),
  /** Behind a proxy the client IP is the first address of `X-Forwarded-For`; otherwise the socket's. */
  TRUST_PROXY: bool.default(false),
  SHUTDOWN_TIMEOUT_MS: int(1000, 60_000).default(20_000),
});

export type ClientOnboardingConfig = z.infer<typeof clientOnboardingConfigSchema>;

/** Parses the environment; throws a {@link ConfigError} naming every bad variable. */
export function loadClientOnboardingConfig(env: NodeJS.ProcessEnv = process.env): ClientOnboardingConfig {
  const parsed = clientOnboardingConfigSchema.safeParse(env);
  if (!parsed.success) {
    const problems = parsed.error.issues.map((i) => `${i.path.join(".")}: ${i.message}`);
    throw new ConfigError(`Invalid configuration:\n  ${problems.join("\n  ")}`);
  }
  return parsed.data;
}
