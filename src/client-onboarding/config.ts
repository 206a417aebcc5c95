import { z } from "zod";
import { bool, int, parseEnvironment, processSettings } from "../runtime/config.js";

/**
 * The client-onboarding service's settings, validated once at start-up. It reads only what it
 * needs, so the web process's settings (Redis, providers, tokens) are not required here.
 */
export const clientOnboardingConfigSchema = z.object({
  ...processSettings,
  PORT: int(0, 65535).default(3100),
  DATABASE_POOL_SIZE: int(1, 200).default(5),
  /** Onboarding requests allowed per client IP in one window. */
  ONBOARD_RATE_LIMIT: int(1, 1_000_000).default(20),
  ONBOARD_RATE_WINDOW_MS: int(1000, 86_400_000).default(60_000),
  /** Behind a proxy the client IP is the last address of `X-Forwarded-For` (our proxy's); otherwise the socket's. */
  TRUST_PROXY: bool.default(false),
});

export type ClientOnboardingConfig = z.infer<typeof clientOnboardingConfigSchema>;

/** Parses the environment; throws a `ConfigError` naming every bad variable. */
export function loadClientOnboardingConfig(env: NodeJS.ProcessEnv = process.env): ClientOnboardingConfig {
  return parseEnvironment(clientOnboardingConfigSchema, env);
}
