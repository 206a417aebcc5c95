import { isIP, isIPv4, isIPv6 } from "node:net";
import { z } from "zod";
import { parseMasterKey } from "./content-crypto.js";
import { parseNetworks } from "./outbound/address-policy.js";
import {
  EMAIL_PROVIDER_KINDS,
  type EmailAccount,
  emailAccount,
  organizationListsSetting,
  type ProviderLists,
  type ProviderRef,
  providerListSetting,
  resolveProviderLists,
  SMS_PROVIDER_KINDS,
  type SmsAccount,
  smsAccount,
} from "./provider-accounts.js";
import { type RedisNode, type RedisTopology, redisTopologyFrom } from "./redis-topology.js";
import { parseSmsSender, smsSenderLimitKey } from "./sms-sender-id.js";

export const bool = z.enum(["true", "false", "1", "0"]).transform((v) => v === "true" || v === "1");
export const int = (min: number, max: number) => z.coerce.number().int().min(min).max(max);
const optionalString = z
  .string()
  .optional()
  .transform((v) => (v === "" ? undefined : v));

/** For an optional number: an empty value (`SEND_RATE_BURST=`) means unset, as for a string. */
const emptyIsUnset = (v: unknown) => (v === "" ? undefined : v);

/**
 * One entry of `DNS_SERVERS` as Node's resolver takes it: an IP address, `ipv4:port` or
 * `[ipv6]:port`, the port from 1 to 65535.
 */
function isDnsServer(entry: string): boolean {
  if (isIP(entry)) return true;
  const bracketed = /^\[([^\]]+)\](?::(\d{1,5}))?$/.exec(entry);
  const withPort = bracketed ?? /^([^:]+):(\d{1,5})$/.exec(entry);
  if (!withPort) return false;
  const [, host = "", port] = withPort;
  if (!(bracketed ? isIPv6(host) : isIPv4(host))) return false;
  return port === undefined || (Number(port) >= 1 && Number(port) <= 65535);
}

/** Host patterns, comma-separated: exact names, `host:port` or `*.suffix`. */
const HOST_PATTERNS = /^\s*(\*\.)?[A-Za-z0-9.-]+(:\d+)?\s*(,\s*(\*\.)?[A-Za-z0-9.-]+(:\d+)?\s*)*$/;
const HOST_PATTERNS_MESSAGE = "must be host names or *.suffix patterns, comma-separated";
const hostList = (list: string): readonly string[] =>
  list.split(",").map((host) => host.trim().toLowerCase());

/** Networks (CIDRs or addresses, comma-separated) an outbound guard may reach besides public addresses. */
const networkList = z
  .string()
  .default("")
  .transform((list, ctx) => {
    try {
      return parseNetworks(list);
    } catch (err) {
      ctx.addIssue({ code: "custom", message: err instanceof Error ? err.message : String(err) });
      return z.NEVER;
    }
  });

/** `host:port` entries, comma-separated (a Redis Cluster's seed nodes, Sentinels); `[ipv6]:port` too. */
const redisNodeList = z.string().transform((list, ctx): readonly RedisNode[] => {
  const nodes: RedisNode[] = [];
  for (const raw of list.split(",")) {
    const entry = raw.trim();
    // `_` too: docker-compose service names (redis_1) are host names there.
    const match = /^(?:\[([0-9A-Fa-f:.]+)\]|([A-Za-z0-9._-]+)):(\d{1,5})$/.exec(entry);
    const port = Number(match?.[3]);
    if (!match || port < 1 || port > 65535) {
      // Never echo credentials: an entry given as a URL (redis://:password@host) shows from its `@` on.
      const shown = entry.includes("@") ? `…@${entry.slice(entry.lastIndexOf("@") + 1)}` : entry;
      ctx.addIssue({
        code: "custom",
        message: `must be host:port entries, comma-separated (port 1-65535); not "${shown}"`,
      });
      return z.NEVER;
    }
    nodes.push({ host: match[1] ?? match[2] ?? "", port });
  }
  return nodes;
});

/** Messages a second (fractions allowed: 0.2 is one every 5 s); 0: no limit. */
const throughputRate = z.coerce
  .number({ error: "must be a number of messages a second (0: no limit)" })
  .min(0, "must be 0 (no limit) or more messages a second")
  .max(100_000, "must be at most 100000 messages a second");

/**
 * `sender=rate` pairs, comma-separated (`ACME=10,+1 415 555 0100=1,12345=100`): each sender id
 * read as a send request's is (a number to E.164) and keyed as its throughput limit is (an
 * alphanumeric id upper-cased), so a pair names exactly the messages it limits.
 */
const senderRateList = z.string().transform((list, ctx): ReadonlyMap<string, number> => {
  const rates = new Map<string, number>();
  const fail = (message: string) => {
    ctx.addIssue({ code: "custom", message });
    return z.NEVER;
  };
  for (const raw of list.split(",")) {
    const entry = raw.trim();
    const equals = entry.lastIndexOf("=");
    if (equals < 0) return fail(`must be sender=rate pairs, comma-separated; not "${entry}"`);
    const sender = parseSmsSender(entry.slice(0, equals));
    if (!sender) {
      return fail(
        `"${entry.slice(0, equals).trim()}" is not an SMS sender id (an alphanumeric id of 1-11 characters, a 3-8 digit short code, or a phone number in international format)`,
      );
    }
    const rate = throughputRate.safeParse(entry.slice(equals + 1).trim() || "x");
    if (!rate.success) return fail(`${sender.value}: ${rate.error.issues[0]?.message ?? "not a rate"}`);
    const key = smsSenderLimitKey(sender.value);
    if (rates.has(key))
      return fail(`${sender.value} is given twice (alphanumeric ids are compared in upper case)`);
    rates.set(key, rate.data);
  }
  return rates;
});

/** A master key: base64 of exactly 32 bytes. */
const masterKey = optionalString.pipe(
  z
    .string()
    .refine((value) => parseMasterKey(value) !== undefined, "must be base64 of exactly 32 bytes")
    .optional(),
);

/**
 * A Postgres URL must leave the client encoding UTF8 (postgres.js's): the statements planned at
 * each call carry their values as literals escaped for UTF-8 (docs/decisions/0049), and in a
 * client encoding such as SJIS a byte of a character could swallow the backslash or quote after it.
 */
function clientEncodingIsUtf8(url: string): boolean {
  if (!URL.canParse(url)) return true; // the URL check says what is wrong
  const params = new URL(url).searchParams;
  const encoding = params.get("client_encoding");
  return (
    (encoding === null || /^utf-?8$/i.test(encoding)) && !/client_encoding/i.test(params.get("options") ?? "")
  );
}
const UTF8_ONLY = "must not set a client_encoding other than UTF8 (docs/decisions/0049)";

/** The settings every process of the project reads the same way, this service's and the onboarding one's. */
export const processSettings = {
  /** Unset means production: a development or test run has to say so (development relaxes the guards). */
  NODE_ENV: z.enum(["development", "test", "production"]).default("production"),
  DATABASE_URL: z
    .url()
    .refine(clientEncodingIsUtf8, UTF8_ONLY)
    .default("postgres://postgres@127.0.0.1:5432/notifications"),
  /** Postgres cancels a statement of ours that runs longer (a plan gone wrong, a lock held for ever). */
  DATABASE_STATEMENT_TIMEOUT_MS: int(100, 3_600_000).default(30_000),
  LOG_LEVEL: z.enum(["fatal", "error", "warn", "info", "debug", "trace", "silent"]).default("info"),
  SHUTDOWN_TIMEOUT_MS: int(1000, 60_000).default(20_000),
};

/** Parses the environment with `schema`; throws a {@link ConfigError} naming every bad variable. */
export function parseEnvironment<S extends z.ZodType>(schema: S, env: NodeJS.ProcessEnv): z.output<S> {
  const parsed = schema.safeParse(env);
  if (!parsed.success) {
    const problems = parsed.error.issues.map((i) => `${i.path.join(".")}: ${i.message}`);
    throw new ConfigError(`Invalid configuration:\n  ${problems.join("\n  ")}`);
  }
  return parsed.data;
}

/**
 * Every setting the processes read, validated once at start-up. Defaults are the ones a local
 * run needs; production-only requirements are checked in {@link loadConfig}.
 */
export const configSchema = z.object({
  ...processSettings,
  PORT: int(0, 65535).default(3000),
  DATABASE_POOL_SIZE: int(1, 200).default(10),
  /**
   * A read replica of DATABASE_URL's Postgres (optional): the API reads records, histories and
   * listings there; a record or history it has not (yet) is read from the primary, so a GET right
   * after a 202 never 404s; a listing may lag by the replica's delay (docs/operations.md).
   */
  DATABASE_READ_URL: optionalString.pipe(
    z
      .url({ protocol: /^postgres(ql)?$/, error: "must be a postgres:// URL" })
      .refine(clientEncodingIsUtf8, UTF8_ONLY)
      .optional(),
  ),
  /**
   * The API's operator port: `/readyz`, `/metrics` and `/admin/queues` leave the public port for
   * this one (`/healthz` stays on both). Unset: they stay on `PORT`.
   */
  OPS_PORT: z.preprocess((v) => (v === "" ? undefined : v), int(1, 65535).optional()),
  /** The interface the operator port listens on: loopback unless an operator opens it. */
  OPS_HOST: z.string().min(1).default("127.0.0.1"),
  /** API processes per web dyno (node:cluster); each has its own DATABASE_POOL_SIZE connections. */
  WEB_CONCURRENCY: int(1, 64).default(1),
  /** A single Redis (or the primary of a replicated one): `redis://` or `rediss://` (TLS). */
  REDIS_URL: z.preprocess(
    emptyIsUnset,
    z
      .url({ protocol: /^rediss?$/, error: "must be a redis:// or rediss:// URL" })
      .default("redis://127.0.0.1:6379"),
  ),
  /** A Redis Cluster instead: some of its nodes (`host:port`, comma-separated); the rest are discovered. */
  REDIS_CLUSTER_NODES: optionalString.pipe(redisNodeList.optional()),
  /** A Sentinel-managed primary instead: the Sentinels (`host:port`, comma-separated). */
  REDIS_SENTINELS: optionalString.pipe(redisNodeList.optional()),
  /** The name the Sentinels monitor the primary under (`sentinel monitor <name> …`). */
  REDIS_SENTINEL_NAME: optionalString,
  /** The data nodes' ACL user (with a cluster or Sentinel; a single Redis may carry it in REDIS_URL). */
  REDIS_USERNAME: optionalString,
  /** The data nodes' password (with a cluster or Sentinel; a single Redis may carry it in REDIS_URL). */
  REDIS_PASSWORD: optionalString,
  /** The Sentinels' own user and password, when they require one (`requirepass` of the Sentinels). */
  REDIS_SENTINEL_USERNAME: optionalString,
  REDIS_SENTINEL_PASSWORD: optionalString,
  /** TLS to every Redis connection (data nodes and Sentinels); a `rediss://` REDIS_URL implies it. */
  REDIS_TLS: bool.default(false),
  /** A PEM file of the CA(s) that signed Redis's certificates (a private CA); unset: the system's. */
  REDIS_TLS_CA_FILE: optionalString,
  QUEUE_PREFIX: z
    .string()
    .regex(/^[A-Za-z0-9_-]{1,40}$/, "letters, digits, _ and - only")
    .default("ntf"),
  /**
   * Delivery queues, each with a hash tag of its own (on a cluster: its own slot, so masters
   * share the queue's load); each message goes to the shard of its id (docs/decisions/0041).
   */
  QUEUE_SHARDS: int(1, 64).default(1),
  /**
   * Fairness between organizations (docs/decisions/0047): the most jobs a delivery queue shard
   * holds waiting before the relay adds more; the rest wait in the outbox, whence each tier's rows
   * leave in turns by organization, so one organization's backlog never stands in front of every
   * other's. Critical messages are never held back. 0: no limit (rows leave in id order, as fast
   * as Redis takes them). Raise it with many workers (each takes `WORKER_CONCURRENCY` at once).
   */
  QUEUE_WAITING_LIMIT: int(0, 1_000_000).default(500),
  /** The shards this worker takes jobs from (0-based, comma-separated); unset: all of them. */
  QUEUE_SHARDS_CONSUMED: optionalString.pipe(
    z
      .string()
      .regex(/^\s*\d{1,2}\s*(,\s*\d{1,2}\s*)*$/, "must be shard numbers (0-based), comma-separated")
      .transform((list) => [...new Set(list.split(",").map((n) => Number(n.trim())))].sort((a, b) => a - b))
      .optional(),
  ),
  ONBOARDING_TOKEN: optionalString.pipe(z.string().min(16, "must be at least 16 characters").optional()),
  ADMIN_USER: optionalString,
  ADMIN_PASSWORD: optionalString,
  SMS_PROVIDER: z.enum(SMS_PROVIDER_KINDS).optional(),
  /**
   * Instead of SMS_PROVIDER: providers in order, `<kind>` or `<kind>:<name>` comma-separated
   * (`twilio:primary,twilio:backup`), each named account's settings in `TWILIO_<NAME>_*`
   * (docs/decisions/0046, src/runtime/provider-accounts.ts).
   */
  SMS_PROVIDERS: optionalString.pipe(providerListSetting(SMS_PROVIDER_KINDS).optional()),
  /** Organizations' own SMS lists: `<organization id>=<list>`, separated by `;`. */
  SMS_PROVIDERS_BY_ORGANIZATION: optionalString.pipe(organizationListsSetting(SMS_PROVIDER_KINDS).optional()),
  SMS_DEFAULT_SENDER: z.string().min(1).default("Notify"),
  /**
   * The most segments (messages billed) one SMS may take: a longer body is refused with a 400
   * that says how many it needs (docs/decisions/0043). 10 segments are 1,530 GSM-7 characters or
   * 670 UCS-2 units.
   */
  SMS_MAX_SEGMENTS: int(1, 100).default(10),
  /**
   * Throughput limits (docs/decisions/0048), shared by every worker through Redis: a message over
   * one waits in its queue (no attempt counted, its time to live still running), never fails.
   * SMS_SENDER_RATE: messages a second from each SMS sender id that SMS_SENDER_RATES does not
   * name; 0: no limit.
   */
  SMS_SENDER_RATE: throughputRate.default(0),
  /** Per-sender rates, `sender=rate` pairs (`ACME=10,+14155550100=1,12345=100`); 0 there: no limit for that one. */
  SMS_SENDER_RATES: optionalString
    .pipe(senderRateList.optional())
    .transform((rates): ReadonlyMap<string, number> => rates ?? new Map()),
  /** Messages a second through each SMS provider account, every sender together; 0: no limit. */
  SMS_PROVIDER_RATE: throughputRate.default(0),
  /** Messages a second through each e-mail provider account (an SMTP relay's sending rate); 0: no limit. */
  EMAIL_PROVIDER_RATE: throughputRate.default(0),
  TWILIO_ACCOUNT_SID: optionalString,
  TWILIO_AUTH_TOKEN: optionalString,
  TWILIO_BASE_URL: z.url().default("https://api.twilio.com"),
  TWILIO_TIMEOUT_MS: int(100, 120_000).default(10_000),
  EMAIL_PROVIDER: z.enum(EMAIL_PROVIDER_KINDS).optional(),
  /** Instead of EMAIL_PROVIDER: servers in order (`smtp:main,smtp:relay2`), settings in `SMTP_<NAME>_*`. */
  EMAIL_PROVIDERS: optionalString.pipe(providerListSetting(EMAIL_PROVIDER_KINDS).optional()),
  /** Organizations' own e-mail lists: `<organization id>=<list>`, separated by `;`. */
  EMAIL_PROVIDERS_BY_ORGANIZATION: optionalString.pipe(
    organizationListsSetting(EMAIL_PROVIDER_KINDS).optional(),
  ),
  /** A provider list's account is skipped after this many transient failures in a row (per worker). */
  PROVIDER_BREAKER_FAILURES: int(1, 1000).default(5),
  /** How long a skipped account is left alone before one probe tries it again. */
  PROVIDER_BREAKER_COOLDOWN_MS: int(100, 3_600_000).default(30_000),
  SMTP_HOST: optionalString,
  SMTP_PORT: int(1, 65535).default(587),
  /** Implicit TLS from the first byte (port 465); otherwise STARTTLS when the server offers it. */
  SMTP_SECURE: bool.default(false),
  /** Refuse to send unless the server upgrades the connection with STARTTLS. */
  SMTP_REQUIRE_TLS: bool.default(false),
  SMTP_USER: optionalString,
  SMTP_PASSWORD: optionalString,
  /**
   * Verify the server's certificate. Unset: verified whenever it matters (credentials are sent,
   * or TLS is required or implicit); otherwise STARTTLS is opportunistic, encrypted but
   * unverified, which is never worse than the plain text it replaces (RFC 7435).
   */
  SMTP_TLS_REJECT_UNAUTHORIZED: bool.optional(),
  /** Connection, greeting and each socket read: a server silent this long is a transient failure. */
  SMTP_TIMEOUT_MS: int(100, 120_000).default(10_000),
  /** Connections each worker keeps open to the SMTP server; sends beyond them wait their turn. */
  SMTP_POOL_SIZE: int(1, 100).default(5),
  PUSH_PROVIDER: z.enum(["simulator", "webpush"]).optional(),
  VAPID_PUBLIC_KEY: optionalString,
  VAPID_PRIVATE_KEY: optionalString,
  /** Who runs this server, for push services (RFC 8292): a mailto: or https: URL. The push record's sender. */
  VAPID_SUBJECT: z
    .string()
    .regex(/^(mailto:|https:\/\/)\S+$/, "must be a mailto: or https: URL")
    .default("mailto:notifications@localhost"),
  PUSH_TIMEOUT_MS: int(100, 120_000).default(10_000),
  /**
   * Hosts push endpoints may point at, comma-separated: exact names or `*.suffix`. The worker
   * POSTs to whatever endpoint a client gives; this keeps it off internal addresses.
   */
  PUSH_ENDPOINT_HOSTS: optionalString.pipe(z.string().regex(HOST_PATTERNS, HOST_PATTERNS_MESSAGE).optional()),
  /**
   * Networks (CIDRs, comma-separated) that outbound requests to addresses tenants choose (push
   * endpoints) may reach besides public addresses; empty: none, so no loopback, private,
   * link-local, CGNAT or metadata address is ever connected to.
   */
  OUTBOUND_ALLOWED_NETWORKS: networkList,
  MAX_DELIVERY_ATTEMPTS: int(1, 50).default(5),
  RETRY_BASE_DELAY_MS: int(1, 3_600_000).default(1000),
  RETRY_MAX_DELAY_MS: int(1, 86_400_000).default(600_000),
  WORKER_CONCURRENCY: int(1, 1000).default(100),
  /** The worker's operator port: /metrics, /healthz and /readyz; 0 turns the server off. */
  WORKER_METRICS_PORT: int(0, 65535).default(9464),
  /** The interface the worker's metrics server listens on: loopback unless an operator opens it. */
  WORKER_METRICS_HOST: z.string().min(1).default("127.0.0.1"),
  SWEEP_INTERVAL_MS: int(100, 3_600_000).default(5000),
  SWEEP_GRACE_MS: int(0, 3_600_000).default(10_000),
  AUTH_CACHE_TTL_MS: int(0, 600_000).default(5000),
  /** A request still unanswered after this gets 503 (a partition can freeze a database connection). */
  REQUEST_TIMEOUT_MS: int(100, 120_000).default(5000),
  /**
   * How many sends, and separately how many reads, each API process lets wait for the database
   * while a statement runs; while one stalls (a migration's lock), one more gets 503 at once.
   */
  DATABASE_QUEUE_LIMIT: int(1, 100_000).default(1000),
  /** Behind a proxy: the client's address is the last of `X-Forwarded-For` (the proxy's entry), not the socket's. */
  TRUST_PROXY: bool.default(false),
  /**
   * Sends per second each organization may sustain (token bucket refill), so one tenant cannot
   * take every other tenant's capacity; 0 turns the limit off (decision 0032).
   */
  SEND_RATE_LIMIT: int(0, 1_000_000).default(100),
  /** Sends an organization may make at once (token bucket capacity; at least SEND_RATE_LIMIT; unset: twice it). */
  SEND_RATE_BURST: z.preprocess(emptyIsUnset, int(1, 10_000_000).optional()),
  /** Messages each organization may have accepted per UTC day, counted in Redis across processes; 0: no quota. */
  SEND_DAILY_QUOTA: int(0, 1_000_000_000).default(100_000),
  /** Template previews (render) per second per organization (token bucket refill); 0 turns the limit off. */
  TEMPLATE_PREVIEW_RATE_LIMIT: int(0, 1_000_000).default(10),
  /** Previews an organization may ask for at once (at least TEMPLATE_PREVIEW_RATE_LIMIT; unset: twice it). */
  TEMPLATE_PREVIEW_RATE_BURST: z.preprocess(emptyIsUnset, int(1, 10_000_000).optional()),
  /**
   * `required`: an e-mail's `from_email` must be at a verified domain of the organization and an
   * SMS sender (other than SMS_DEFAULT_SENDER) one of its approved senders; `off`: any sender, for
   * a single-tenant install. Unset: required in production, off in development and test.
   */
  SENDER_VERIFICATION: z.enum(["required", "off"]).optional(),
  /** Senders (e-mail domains and SMS sender ids, any status) an organization may register; one more is a 409. */
  SENDER_MAX_PER_ORGANIZATION: int(1, 100_000).default(100),
  /** The DNS servers a domain's TXT record is asked of, comma-separated (`ip` or `ip:port`); unset: the system's. */
  DNS_SERVERS: optionalString.pipe(
    z
      .string()
      .superRefine((list, ctx) => {
        const bad = list.split(",").find((entry) => !isDnsServer(entry.trim()));
        if (bad !== undefined)
          ctx.addIssue({
            code: "custom",
            message: `must be IP addresses, comma-separated (ip, ip:port or [ipv6]:port, port 1-65535); not "${bad.trim()}"`,
          });
      })
      .optional(),
  ),
  /** BullMQ job lock: a killed worker's jobs are taken again once it expires (then the next stall check). */
  WORKER_LOCK_DURATION_MS: int(1000, 600_000).default(30_000),
  /** How often a worker looks for stalled jobs (active, lock expired). */
  WORKER_STALLED_INTERVAL_MS: int(500, 600_000).default(30_000),
  /** While Postgres is unreachable the worker pauses and probes it this often. */
  DATABASE_PROBE_INTERVAL_MS: int(50, 60_000).default(1000),
  /** Template render threads per web and worker process; an organization runs on all but one (decision 0029). */
  TEMPLATE_RENDER_THREADS: int(1, 32).default(2),
  /** Renders one organization may have waiting per process; more are refused (preview 429, e-mail handed back). */
  TEMPLATE_RENDER_QUEUE_PER_ORGANIZATION: int(1, 10_000).default(20),
  /** The time a template may take to render a sample when it is saved; slower: 422. */
  TEMPLATE_SAVE_RENDER_BUDGET_MS: int(50, 2000).default(500),
  /** Templates one organization may have; a create beyond: 409. */
  TEMPLATE_MAX_PER_ORGANIZATION: int(1, 1_000_000).default(1000),
  /**
   * Base64 of 32 random bytes (`openssl rand -base64 32`): wraps the organizations' data keys,
   * which seal message content at rest. Required in production; development and test use a fixed,
   * public key when it is unset (docs/decisions/0034).
   */
  CONTENT_MASTER_KEY: masterKey,
  /** The name stored with each data key wrapped by CONTENT_MASTER_KEY, so a later key can be told apart. */
  CONTENT_MASTER_KEY_ID: z
    .string()
    .regex(/^[A-Za-z0-9_.-]{1,40}$/, "letters, digits, _ . and - only")
    .default("1"),
  /**
   * Earlier master keys that still unwrap older data keys: `id:base64` pairs, comma-separated
   * (the rotation of CONTENT_MASTER_KEY, docs/operations.md).
   */
  CONTENT_PREVIOUS_MASTER_KEYS: optionalString.pipe(
    z
      .string()
      .refine(
        (value) =>
          value.split(",").every((pair) => {
            const [id, key] = pair.trim().split(":");
            return Boolean(id && /^[A-Za-z0-9_.-]{1,40}$/.test(id) && key && parseMasterKey(key));
          }),
        "must be id:base64 pairs, comma-separated, each key 32 bytes",
      )
      .optional(),
  ),
  /** How long a process keeps an unwrapped data key; a destroyed key still opens (never seals) content there until then. */
  DATA_KEY_CACHE_TTL_MS: int(0, 3_600_000).default(60_000),
  /**
   * Base64 of 32 random bytes: seals the signing secrets of status webhook endpoints at rest.
   * Required in production; development and test use a fixed, public key when it is unset
   * (docs/decisions/0035).
   */
  WEBHOOK_SECRET_KEY: masterKey,
  /**
   * Networks (CIDRs, comma-separated) that webhook endpoints may reach besides public addresses;
   * empty: none. Separate from OUTBOUND_ALLOWED_NETWORKS (push): every organization chooses its
   * webhook URLs, so a network opened for a push gateway is not opened to them.
   */
  WEBHOOK_ALLOWED_NETWORKS: networkList,
  /**
   * Hosts a webhook endpoint may reach over plain `http://`, comma-separated: exact names, `host:port`
   * or `*.suffix`; unset: none (HTTPS only). Private addresses also need WEBHOOK_ALLOWED_NETWORKS.
   */
  WEBHOOK_ALLOWED_HOSTS: optionalString
    .pipe(z.string().regex(HOST_PATTERNS, HOST_PATTERNS_MESSAGE).optional())
    .transform((list): readonly string[] => (list ? hostList(list) : [])),
  /** Webhook attempts one worker has in flight at most, to every endpoint together (docs/decisions/0036). */
  WEBHOOK_CONCURRENCY: int(1, 10_000).default(128),
  /** Webhook attempts one worker has in flight to one endpoint at most: a slow endpoint holds no more. */
  WEBHOOK_ENDPOINT_CONCURRENCY: int(1, 100).default(4),
  /**
   * How long a worker holds a webhook delivery it claimed: if it dies mid-attempt, another worker
   * tries again after this. More than an attempt's 10 s time-out.
   */
  WEBHOOK_LEASE_MS: int(11_000, 3_600_000).default(30_000),
  /**
   * The service's public address as providers reach it (`https://notify.example.com`, a path
   * prefix allowed): Twilio's status callbacks go to it + `/callbacks/twilio/sms/{message_id}`
   * and their signatures are checked against that URL, never against `Host` or `X-Forwarded-*`
   * (docs/decisions/0038). Unset: no status callback is asked for, so no delivery receipt comes.
   */
  PUBLIC_BASE_URL: optionalString.pipe(
    z
      .url({ protocol: /^https?$/, error: "must be an http(s):// URL" })
      .refine((value) => {
        // Checked after the URL check failed too (zod goes on): a value that is no URL passes here.
        const url = URL.canParse(value) ? new URL(value) : undefined;
        return !url || (url.search === "" && url.hash === "" && url.username === "" && url.password === "");
      }, "must have no query, #fragment, user name or password")
      .transform((value) => value.replace(/\/+$/, ""))
      .optional(),
  ),
  /**
   * How long messages (their records and events) are kept, in days (docs/decisions/0042): the
   * worker drops each day's partitions once the day is older, so a message stays between this
   * and one more day. At least 14: a webhook delivery of a message's event is retried for about
   * 28 h (up to 33 h with jitter, longer after a Retry-After) and its claim reads the message;
   * `POST …/recover` reads messages up to 9 days old; an endpoint is disabled after 5 days of
   * failures. (Dropping a day also deletes its messages' webhook deliveries and outbox rows.)
   */
  MESSAGE_RETENTION_DAYS: int(14, 36_500).default(90),
  /** How long webhook attempts are kept (the endpoint's attempts listing), in days; older ones are purged. */
  WEBHOOK_ATTEMPT_RETENTION_DAYS: int(1, 3650).default(30),
  /**
   * E-mail bounces and complaints (docs/decisions/0040). The domain whose MX points at the
   * `bounces` process: every e-mail goes out with the envelope sender (return path)
   * `BOUNCE_LOCAL_PART+{message_id}@BOUNCE_DOMAIN`, where DSNs and ARF reports come back. Unset:
   * the envelope sender is the From address, and no bounce is ever tied to a message.
   */
  BOUNCE_DOMAIN: optionalString.pipe(
    z
      .string()
      .regex(
        /^(?=.{1,253}$)([A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.)+[A-Za-z]{2,63}$/,
        "must be a domain name",
      )
      .transform((domain) => domain.toLowerCase())
      .optional(),
  ),
  /** The local part's prefix of the return path (`bounce` + `+` + the message id). */
  BOUNCE_LOCAL_PART: z
    .string()
    .regex(/^[a-z0-9][a-z0-9._-]{0,30}$/, "lower-case letters, digits, . _ and - only (at most 31)")
    .default("bounce"),
  /** The `bounces` process's SMTP port (an MX is reached on 25: map it, or run behind a relay). */
  BOUNCES_PORT: int(0, 65535).default(2525),
  /** The interface it listens on: loopback unless an operator opens it (0.0.0.0 behind the MX). */
  BOUNCES_HOST: z.string().min(1).default("127.0.0.1"),
  /** SMTP connections the `bounces` process serves at once, from everyone; more are refused (421). */
  BOUNCES_MAX_CLIENTS: int(1, 10_000).default(100),
  /** SMTP connections one IP address may have open at once; more are refused (421). */
  BOUNCES_MAX_CONNECTIONS_PER_IP: int(1, 10_000).default(10),
  /**
   * The one address registered with mailbox providers' feedback loops (Yahoo CFL, Microsoft JMRP),
   * which send their abuse reports there rather than to the return path, e.g. `fbl@BOUNCE_DOMAIN`
   * (lower-cased; at BOUNCE_DOMAIN, checked by the bounces process). Unset: no such address is
   * taken (docs/decisions/0040).
   */
  BOUNCES_FEEDBACK_ADDRESS: optionalString.pipe(
    z
      .email("must be an e-mail address")
      .transform((address) => address.toLowerCase())
      .optional(),
  ),
  /**
   * STARTTLS on the bounces listener: the PEM private key and certificate (chain) files. Both or
   * neither; unset, the listener offers no STARTTLS and mail servers deliver in clear text.
   */
  BOUNCES_TLS_KEY_FILE: optionalString,
  BOUNCES_TLS_CERT_FILE: optionalString,
});

type Parsed = z.infer<typeof configSchema>;
export type Config = Omit<
  Parsed,
  | "SMS_PROVIDER"
  | "EMAIL_PROVIDER"
  | "SMS_PROVIDERS"
  | "SMS_PROVIDERS_BY_ORGANIZATION"
  | "EMAIL_PROVIDERS"
  | "EMAIL_PROVIDERS_BY_ORGANIZATION"
  | "PUSH_PROVIDER"
  | "SMTP_TLS_REJECT_UNAUTHORIZED"
  | "PUSH_ENDPOINT_HOSTS"
  | "SENDER_VERIFICATION"
  | "DNS_SERVERS"
  | "QUEUE_SHARDS_CONSUMED"
> & {
  /** The shards this worker consumes: QUEUE_SHARDS_CONSUMED, or every shard. */
  QUEUE_SHARDS_CONSUMED: readonly number[];
  SENDER_VERIFICATION: NonNullable<Parsed["SENDER_VERIFICATION"]>;
  /** null: the system's DNS servers. */
  DNS_SERVERS: readonly string[] | null;
  /** null: any host. */
  PUSH_ENDPOINT_HOSTS: readonly string[] | null;
  SMTP_TLS_REJECT_UNAUTHORIZED: boolean;
  /** The one SMS provider; unset exactly when SMS_PROVIDERS (a list) is set. */
  SMS_PROVIDER?: NonNullable<Parsed["SMS_PROVIDER"]>;
  /** SMS_PROVIDERS and SMS_PROVIDERS_BY_ORGANIZATION, every account resolved (docs/decisions/0046). */
  SMS_PROVIDERS?: ProviderLists<SmsAccount>;
  /** The one e-mail provider; unset exactly when EMAIL_PROVIDERS (a list) is set. */
  EMAIL_PROVIDER?: NonNullable<Parsed["EMAIL_PROVIDER"]>;
  /** EMAIL_PROVIDERS and EMAIL_PROVIDERS_BY_ORGANIZATION, every account resolved. */
  EMAIL_PROVIDERS?: ProviderLists<EmailAccount>;
  PUSH_PROVIDER: NonNullable<Parsed["PUSH_PROVIDER"]>;
  /** Where Redis is (one node, a cluster or a Sentinel-managed primary), from the REDIS_* settings. */
  REDIS: RedisTopology;
};

export class ConfigError extends Error {}

/** The push services of Chrome/Edge/Android (FCM), Firefox, Safari and Windows. */
export const BROWSER_PUSH_SERVICES: readonly string[] = [
  "fcm.googleapis.com",
  "*.push.services.mozilla.com",
  "*.push.apple.com",
  "*.notify.windows.com",
];

/** Parses the environment; throws a {@link ConfigError} naming every bad variable. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const c = parseEnvironment(configSchema, env);
  const production = c.NODE_ENV === "production";
  // Outside production every channel defaults to its simulator; in production each is a choice.
  // A list (SMS_PROVIDERS) takes the single provider's place.
  const smsProvider = c.SMS_PROVIDERS
    ? undefined
    : (c.SMS_PROVIDER ?? (production ? undefined : "simulator"));
  const emailProvider = c.EMAIL_PROVIDERS
    ? undefined
    : (c.EMAIL_PROVIDER ?? (production ? undefined : "simulator"));
  const pushProvider = c.PUSH_PROVIDER ?? (production ? undefined : "simulator");
  const problems: string[] = [];
  if (!smsProvider && !c.SMS_PROVIDERS)
    problems.push(
      "SMS_PROVIDER: required when NODE_ENV=production (simulator or twilio), or a list in SMS_PROVIDERS",
    );
  if (!emailProvider && !c.EMAIL_PROVIDERS)
    problems.push(
      "EMAIL_PROVIDER: required when NODE_ENV=production (simulator or smtp), or a list in EMAIL_PROVIDERS",
    );
  const sms = providerLists(
    problems,
    "SMS",
    c.SMS_PROVIDER,
    c.SMS_PROVIDERS,
    c.SMS_PROVIDERS_BY_ORGANIZATION,
    smsAccount(env, c),
  );
  const email = providerLists(
    problems,
    "EMAIL",
    c.EMAIL_PROVIDER,
    c.EMAIL_PROVIDERS,
    c.EMAIL_PROVIDERS_BY_ORGANIZATION,
    emailAccount(env, c),
  );
  if (!pushProvider) problems.push("PUSH_PROVIDER: required when NODE_ENV=production (simulator or webpush)");
  if (smsProvider === "twilio" && (!c.TWILIO_ACCOUNT_SID || !c.TWILIO_AUTH_TOKEN)) {
    problems.push("TWILIO_ACCOUNT_SID / TWILIO_AUTH_TOKEN: required when SMS_PROVIDER=twilio");
  }
  if (emailProvider === "smtp" && !c.SMTP_HOST) problems.push("SMTP_HOST: required when EMAIL_PROVIDER=smtp");
  if (Boolean(c.SMTP_USER) !== Boolean(c.SMTP_PASSWORD)) {
    problems.push("SMTP_USER / SMTP_PASSWORD: set both or neither");
  }
  if (pushProvider === "webpush" && (!c.VAPID_PUBLIC_KEY || !c.VAPID_PRIVATE_KEY)) {
    problems.push(
      "VAPID_PUBLIC_KEY / VAPID_PRIVATE_KEY: required when PUSH_PROVIDER=webpush (generate them with `npx web-push generate-vapid-keys`)",
    );
  }
  if (c.OPS_PORT === c.PORT) problems.push("OPS_PORT: must differ from PORT");
  if (Boolean(c.ADMIN_USER) !== Boolean(c.ADMIN_PASSWORD)) {
    problems.push("ADMIN_USER / ADMIN_PASSWORD: set both or neither");
  }
  if (production && c.ADMIN_PASSWORD !== undefined && c.ADMIN_PASSWORD.length < 16) {
    problems.push("ADMIN_PASSWORD: must be at least 16 characters when NODE_ENV=production");
  }
  if (production && !c.CONTENT_MASTER_KEY) {
    problems.push("CONTENT_MASTER_KEY: required when NODE_ENV=production (base64 of 32 random bytes)");
  }
  if (production && !c.WEBHOOK_SECRET_KEY) {
    problems.push("WEBHOOK_SECRET_KEY: required when NODE_ENV=production (base64 of 32 random bytes)");
  }
  const missingShard = c.QUEUE_SHARDS_CONSUMED?.find((shard) => shard >= c.QUEUE_SHARDS);
  if (missingShard !== undefined) {
    problems.push(
      `QUEUE_SHARDS_CONSUMED: there is no shard ${missingShard} (QUEUE_SHARDS=${c.QUEUE_SHARDS}: shards 0 to ${c.QUEUE_SHARDS - 1})`,
    );
  }
  const redis = redisTopologyFrom(c, Boolean(env.REDIS_URL));
  problems.push(...redis.problems);
  if (problems.length > 0 || !redis.topology) {
    throw new ConfigError(`Invalid configuration:\n  ${problems.join("\n  ")}`);
  }
  // The lists as written are read into SMS_PROVIDERS and EMAIL_PROVIDERS with their accounts.
  const {
    SMS_PROVIDERS: _smsList,
    SMS_PROVIDERS_BY_ORGANIZATION: _smsByOrganization,
    EMAIL_PROVIDERS: _emailList,
    EMAIL_PROVIDERS_BY_ORGANIZATION: _emailByOrganization,
    ...settings
  } = c;
  return {
    ...settings,
    REDIS: redis.topology,
    QUEUE_SHARDS_CONSUMED:
      c.QUEUE_SHARDS_CONSUMED ?? Array.from({ length: c.QUEUE_SHARDS }, (_, shard) => shard),
    ...(sms ? { SMS_PROVIDERS: sms, SMS_PROVIDER: undefined } : { SMS_PROVIDER: smsProvider ?? "simulator" }),
    ...(email
      ? { EMAIL_PROVIDERS: email, EMAIL_PROVIDER: undefined }
      : { EMAIL_PROVIDER: emailProvider ?? "simulator" }),
    PUSH_PROVIDER: pushProvider ?? "simulator",
    // webpush sends, so it keeps to the browsers' push services unless told otherwise, in every
    // environment; the simulator sends nothing (outside production, any host).
    PUSH_ENDPOINT_HOSTS: c.PUSH_ENDPOINT_HOSTS
      ? hostList(c.PUSH_ENDPOINT_HOSTS)
      : production || pushProvider === "webpush"
        ? BROWSER_PUSH_SERVICES
        : null,
    SENDER_VERIFICATION: c.SENDER_VERIFICATION ?? (production ? "required" : "off"),
    DNS_SERVERS: c.DNS_SERVERS ? c.DNS_SERVERS.split(",").map((server) => server.trim()) : null,
    SMTP_TLS_REJECT_UNAUTHORIZED:
      c.SMTP_TLS_REJECT_UNAUTHORIZED ?? (Boolean(c.SMTP_USER) || c.SMTP_SECURE || c.SMTP_REQUIRE_TLS),
  };
}

/**
 * A channel's provider lists (`SMS_PROVIDERS`, its organizations' lists), every account resolved,
 * or undefined without a list; a problem for a list beside the single provider's setting, and for
 * organizations' lists without a default one.
 */
function providerLists<A extends { name: string }, K extends string>(
  problems: string[],
  channel: "SMS" | "EMAIL",
  single: string | undefined,
  order: readonly ProviderRef<K>[] | undefined,
  byOrganization: ReadonlyMap<string, readonly ProviderRef<K>[]> | undefined,
  account: (ref: ProviderRef<K>, listedIn: string, problems: string[]) => A,
): ProviderLists<A> | undefined {
  if (order && single)
    problems.push(
      `${channel}_PROVIDERS: set ${channel}_PROVIDER (one provider) or ${channel}_PROVIDERS (a list), not both`,
    );
  if (byOrganization && !order)
    problems.push(`${channel}_PROVIDERS_BY_ORGANIZATION: only with ${channel}_PROVIDERS (the default list)`);
  if (!order) return undefined;
  const resolved = resolveProviderLists(
    `${channel}_PROVIDERS`,
    { order, ...(byOrganization && { byOrganization }) },
    account,
  );
  problems.push(...resolved.problems);
  return resolved.lists;
}

/** The web process refuses to start in production without an onboarding token. */
export function assertWebConfig(config: Config): void {
  if (config.NODE_ENV === "production" && !config.ONBOARDING_TOKEN) {
    throw new ConfigError("Invalid configuration:\n  ONBOARDING_TOKEN: required when NODE_ENV=production");
  }
}
