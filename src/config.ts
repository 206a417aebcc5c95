import { z } from "zod";

const bool = z.enum(["true", "false", "1", "0"]).transform((v) => v === "true" || v === "1");
const int = (min: number, max: number) => z.coerce.number().int().min(min).max(max);
const optionalString = z
  .string()
  .optional()
  .transform((v) => (v === "" ? undefined : v));

/**
 * Every setting the processes read, validated once at start-up. Defaults are the ones a local
 * run needs; production-only requirements are checked in {@link loadConfig}.
 */
export const configSchema = z.object({
  NODE_ENV: z.enum(["development", "test", "production"]).default("development"),
  PORT: int(0, 65535).default(3000),
  DATABASE_URL: z.url().default("postgres://postgres@127.0.0.1:5432/notifications"),
  DATABASE_POOL_SIZE: int(1, 200).default(10),
  /** API processes per web dyno (node:cluster); each has its own DATABASE_POOL_SIZE connections. */
  WEB_CONCURRENCY: int(1, 64).default(1),
  REDIS_URL: z.url().default("redis://127.0.0.1:6379"),
  QUEUE_PREFIX: z
    .string()
    .regex(/^[A-Za-z0-9_-]{1,40}$/, "letters, digits, _ and - only")
    .default("ntf"),
  LOG_LEVEL: z.enum(["fatal", "error", "warn", "info", "debug", "trace", "silent"]).default("info"),
  ONBOARDING_TOKEN: optionalString.pipe(z.string().min(16, "must be at least 16 characters").optional()),
  ADMIN_USER: optionalString,
  ADMIN_PASSWORD: optionalString,
  SMS_PROVIDER: z.enum(["simulator", "twilio"]).optional(),
  SMS_DEFAULT_SENDER: z.string().min(1).default("Notify"),
  TWILIO_ACCOUNT_SID: optionalString,
  TWILIO_AUTH_TOKEN: optionalString,
  TWILIO_BASE_URL: z.url().default("https://api.twilio.com"),
  TWILIO_TIMEOUT_MS: int(100, 120_000).default(10_000),
  MAX_DELIVERY_ATTEMPTS: int(1, 50).default(5),
  RETRY_BASE_DELAY_MS: int(1, 3_600_000).default(1000),
  RETRY_MAX_DELAY_MS: int(1, 86_400_000).default(600_000),
  WORKER_CONCURRENCY: int(1, 1000).default(100),
  /** The worker's /metrics, /healthz and /readyz; 0 turns the server off. */
  WORKER_METRICS_PORT: int(0, 65535).default(9464),
  SWEEP_INTERVAL_MS: int(100, 3_600_000).default(5000),
  SWEEP_GRACE_MS: int(0, 3_600_000).default(10_000),
  SHUTDOWN_TIMEOUT_MS: int(1000, 60_000).default(20_000),
  AUTH_CACHE_TTL_MS: int(0, 600_000).default(5000),
  /** A request still unanswered after this gets 503 (a partition can freeze a database connection). */
  REQUEST_TIMEOUT_MS: int(100, 120_000).default(5000),
  TRUST_PROXY: bool.default(false),
  /** Sends per second each organization may sustain (token bucket refill); 0 turns the limit off. */
  SEND_RATE_LIMIT: int(0, 1_000_000).default(1000),
  /** Sends an organization may make at once (token bucket capacity; at least SEND_RATE_LIMIT). */
  SEND_RATE_BURST: int(1, 10_000_000).default(2000),
  /** BullMQ job lock: a killed worker's jobs are taken again once it expires (then the next stall check). */
  WORKER_LOCK_DURATION_MS: int(1000, 600_000).default(30_000),
  /** How often a worker looks for stalled jobs (active, lock expired). */
  WORKER_STALLED_INTERVAL_MS: int(500, 600_000).default(30_000),
  /** While Postgres is unreachable the worker pauses and probes it this often. */
  DATABASE_PROBE_INTERVAL_MS: int(50, 60_000).default(1000),
});

export type Config = Omit<z.infer<typeof configSchema>, "SMS_PROVIDER"> & {
  SMS_PROVIDER: "simulator" | "twilio";
};

export class ConfigError extends Error {}

/** Parses the environment; throws a {@link ConfigError} naming every bad variable. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const parsed = configSchema.safeParse(env);
  if (!parsed.success) {
    const problems = parsed.error.issues.map((i) => `${i.path.join(".")}: ${i.message}`);
    throw new ConfigError(`Invalid configuration:\n  ${problems.join("\n  ")}`);
  }
  const c = parsed.data;
  const production = c.NODE_ENV === "production";
  const smsProvider = c.SMS_PROVIDER ?? (production ? undefined : "simulator");
  const problems: string[] = [];
  if (!smsProvider) problems.push("SMS_PROVIDER: required when NODE_ENV=production (simulator or twilio)");
  if (smsProvider === "twilio" && (!c.TWILIO_ACCOUNT_SID || !c.TWILIO_AUTH_TOKEN)) {
    problems.push("TWILIO_ACCOUNT_SID / TWILIO_AUTH_TOKEN: required when SMS_PROVIDER=twilio");
  }
  if (Boolean(c.ADMIN_USER) !== Boolean(c.ADMIN_PASSWORD)) {
    problems.push("ADMIN_USER / ADMIN_PASSWORD: set both or neither");
  }
  if (problems.length > 0) throw new ConfigError(`Invalid configuration:\n  ${problems.join("\n  ")}`);
  return { ...c, SMS_PROVIDER: smsProvider ?? "simulator" };
}

/** The web process refuses to start in production without an onboarding token. */
export function assertWebConfig(config: Config): void {
  if (config.NODE_ENV === "production" && !config.ONBOARDING_TOKEN) {
    throw new ConfigError("Invalid configuration:\n  ONBOARDING_TOKEN: required when NODE_ENV=production");
  }
}
