import type { z } from "zod";
import { ConfigError, configSchema, parseEnvironment } from "../runtime/config.js";

/**
 * The `bounces` process's settings: only what it needs (Postgres and its own), so the web and
 * worker's requirements in production (providers, master keys, Redis) are not asked of it. The
 * settings themselves are declared once, with the others (src/runtime/config.ts).
 */
export const bouncesConfigSchema = configSchema.pick({
  NODE_ENV: true,
  DATABASE_URL: true,
  DATABASE_STATEMENT_TIMEOUT_MS: true,
  LOG_LEVEL: true,
  SHUTDOWN_TIMEOUT_MS: true,
  BOUNCE_DOMAIN: true,
  BOUNCE_LOCAL_PART: true,
  BOUNCES_PORT: true,
  BOUNCES_HOST: true,
  BOUNCES_MAX_CLIENTS: true,
  BOUNCES_MAX_CONNECTIONS_PER_IP: true,
});

export type BouncesConfig = z.infer<typeof bouncesConfigSchema> & { BOUNCE_DOMAIN: string };

/** Parses the environment; throws a `ConfigError` naming every bad variable (BOUNCE_DOMAIN is required). */
export function loadBouncesConfig(env: NodeJS.ProcessEnv = process.env): BouncesConfig {
  const config = parseEnvironment(bouncesConfigSchema, env);
  if (!config.BOUNCE_DOMAIN) {
    throw new ConfigError("Invalid configuration:\n  BOUNCE_DOMAIN: required by the bounces process");
  }
  return { ...config, BOUNCE_DOMAIN: config.BOUNCE_DOMAIN };
}
