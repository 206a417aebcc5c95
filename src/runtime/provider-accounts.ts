import { z } from "zod";

/**
 * Provider lists (docs/decisions/0046): `SMS_PROVIDERS=twilio:primary,twilio:backup`,
 * `EMAIL_PROVIDERS=smtp:main,smtp:relay2`, each entry `<kind>` or `<kind>:<name>`, and the
 * organizations' own lists, `SMS_PROVIDERS_BY_ORGANIZATION=<organization id>=<list>;…`.
 *
 * A named account's settings are the variables `<KIND>_<NAME>_<SETTING>` (`twilio:backup` →
 * `TWILIO_BACKUP_ACCOUNT_SID`); a name is lower-case letters and digits, so the variable splits
 * one way only. A bare kind (`twilio`, `smtp`) is the account of the unprefixed settings
 * (`TWILIO_ACCOUNT_SID` …), so a backup can be added beside an existing account without renaming
 * it: its messages' history keeps calling it `twilio`. `simulator` needs no settings.
 */

export const SMS_PROVIDER_KINDS = ["simulator", "twilio"] as const;
export const EMAIL_PROVIDER_KINDS = ["simulator", "smtp"] as const;

/** One entry of a list, as written. */
export interface ProviderRef<K extends string = string> {
  kind: K;
  /** `twilio:backup`, or the bare kind. */
  name: string;
  /** The account's name after the colon; none for a bare kind. */
  account?: string;
}

const ENTRY = /^([a-z]+)(?::([a-z][a-z0-9]{0,19}))?$/;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

function parseList<K extends string>(
  list: string,
  kinds: readonly K[],
): { refs: ProviderRef<K>[] } | { problem: string } {
  const refs: ProviderRef<K>[] = [];
  for (const raw of list.split(",")) {
    const entry = raw.trim();
    const match = ENTRY.exec(entry);
    const kind = match?.[1] as K | undefined;
    if (!match || !kind) {
      return {
        problem: `must be <kind> or <kind>:<name> entries, comma-separated (a name: lower-case letters and digits, up to 20, starting with a letter); not "${entry}"`,
      };
    }
    if (!kinds.includes(kind)) return { problem: `"${entry}": the kind must be one of ${kinds.join(", ")}` };
    if (refs.some((ref) => ref.name === entry)) return { problem: `"${entry}" is listed twice` };
    refs.push({ kind, name: entry, ...(match[2] && { account: match[2] }) });
  }
  return { refs };
}

/** The zod schema of a list variable (`SMS_PROVIDERS`). */
export function providerListSetting<K extends string>(kinds: readonly K[]) {
  return z.string().transform((list, ctx): readonly ProviderRef<K>[] => {
    const parsed = parseList(list, kinds);
    if ("refs" in parsed) return parsed.refs;
    ctx.addIssue({ code: "custom", message: parsed.problem });
    return z.NEVER;
  });
}

/** The zod schema of an organizations' lists variable (`SMS_PROVIDERS_BY_ORGANIZATION`). */
export function organizationListsSetting<K extends string>(kinds: readonly K[]) {
  return z.string().transform((value, ctx): ReadonlyMap<string, readonly ProviderRef<K>[]> => {
    const lists = new Map<string, readonly ProviderRef<K>[]>();
    for (const raw of value.split(";")) {
      if (raw.trim() === "") continue;
      const [id = "", list, ...rest] = raw.split("=");
      const organizationId = id.trim().toLowerCase();
      const parsed = list === undefined || rest.length > 0 ? undefined : parseList(list, kinds);
      const problem = !UUID.test(organizationId)
        ? `must be <organization id>=<list> entries, separated by ";"; not "${raw.trim()}"`
        : lists.has(organizationId)
          ? `organization ${organizationId} is listed twice`
          : parsed === undefined
            ? `must be <organization id>=<list> entries, separated by ";"; not "${raw.trim()}"`
            : "problem" in parsed
              ? `organization ${organizationId}: ${parsed.problem}`
              : undefined;
      if (problem !== undefined || parsed === undefined || !("refs" in parsed)) {
        ctx.addIssue({ code: "custom", message: problem ?? "unreadable" });
        return z.NEVER;
      }
      lists.set(organizationId, parsed.refs);
    }
    return lists;
  });
}

/** A Twilio account: the provider of an SMS list's `twilio` entries. */
export interface TwilioAccount {
  kind: "twilio";
  name: string;
  accountSid: string;
  authToken: string;
  baseUrl: string;
  timeoutMs: number;
}

export interface SmtpAccount {
  kind: "smtp";
  name: string;
  host: string;
  port: number;
  secure: boolean;
  requireTls: boolean;
  user?: string;
  password?: string;
  rejectUnauthorized: boolean;
  timeoutMs: number;
  poolSize: number;
}

export interface SimulatorAccount {
  kind: "simulator";
  name: string;
}

export type SmsAccount = TwilioAccount | SimulatorAccount;
export type EmailAccount = SmtpAccount | SimulatorAccount;

/** A channel's provider lists, every account resolved. */
export interface ProviderLists<A extends { name: string }> {
  /** Every account a list names (the default's and the organizations'), each once. */
  accounts: readonly A[];
  /** The default order, by account name. */
  order: readonly string[];
  /** Organizations with an order of their own, by id (lower-case). */
  byOrganization: ReadonlyMap<string, readonly string[]>;
}

const bool = z.enum(["true", "false", "1", "0"]).transform((v) => v === "true" || v === "1");
const int = (min: number, max: number) => z.coerce.number().int().min(min).max(max);
const text = z.string().min(1);

/** A named Twilio account's settings (`TWILIO_<NAME>_…`). */
const TWILIO_SETTINGS = {
  ACCOUNT_SID: text,
  AUTH_TOKEN: text,
  BASE_URL: z.url().optional(),
  TIMEOUT_MS: int(100, 120_000).optional(),
};
const TWILIO_REQUIRED = ["ACCOUNT_SID", "AUTH_TOKEN"] as const;

/** A named SMTP server's settings (`SMTP_<NAME>_…`). */
const SMTP_SETTINGS = {
  HOST: text,
  PORT: int(1, 65535).optional(),
  SECURE: bool.optional(),
  REQUIRE_TLS: bool.optional(),
  USER: text.optional(),
  PASSWORD: text.optional(),
  TLS_REJECT_UNAUTHORIZED: bool.optional(),
  TIMEOUT_MS: int(100, 120_000).optional(),
  POOL_SIZE: int(1, 100).optional(),
};
const SMTP_REQUIRED = ["HOST"] as const;

/** The unprefixed settings of the kinds' bare accounts, as the main schema has read them. */
export interface BareAccountSettings {
  TWILIO_ACCOUNT_SID?: string | undefined;
  TWILIO_AUTH_TOKEN?: string | undefined;
  TWILIO_BASE_URL: string;
  TWILIO_TIMEOUT_MS: number;
  SMTP_HOST?: string | undefined;
  SMTP_PORT: number;
  SMTP_SECURE: boolean;
  SMTP_REQUIRE_TLS: boolean;
  SMTP_USER?: string | undefined;
  SMTP_PASSWORD?: string | undefined;
  SMTP_TLS_REJECT_UNAUTHORIZED?: boolean | undefined;
  SMTP_TIMEOUT_MS: number;
  SMTP_POOL_SIZE: number;
}

/** Unprefixed variables that a named account's prefix could seem to cover (`TWILIO_BASE_URL` for `base`). */
const BARE_VARIABLES = new Set([
  ...Object.keys(TWILIO_SETTINGS).map((key) => `TWILIO_${key}`),
  ...Object.keys(SMTP_SETTINGS).map((key) => `SMTP_${key}`),
]);

type Shape = Record<string, z.ZodType>;

/**
 * A named account's settings from `env`, each variable `<PREFIX>_<KEY>`: a problem naming the
 * variable for a bad or missing one, and for a variable under the prefix that is no setting.
 */
function readSettings<S extends Shape>(
  env: NodeJS.ProcessEnv,
  prefix: string,
  shape: S,
  required: readonly (keyof S & string)[],
  entry: string,
  problems: string[],
): { [K in keyof S]: z.output<S[K]> } {
  const values: Record<string, unknown> = {};
  for (const [key, schema] of Object.entries(shape)) {
    const variable = `${prefix}_${key}`;
    const raw = env[variable] === "" ? undefined : env[variable];
    if (raw === undefined && required.includes(key)) {
      problems.push(`${variable}: required by ${entry}`);
      continue;
    }
    const parsed = schema.safeParse(raw);
    if (parsed.success) values[key] = parsed.data;
    else problems.push(`${variable}: ${parsed.error.issues[0]?.message ?? "invalid"} (${entry})`);
  }
  for (const variable of Object.keys(env)) {
    if (!variable.startsWith(`${prefix}_`) || BARE_VARIABLES.has(variable)) continue;
    const key = variable.slice(prefix.length + 1);
    if (!Object.hasOwn(shape, key))
      problems.push(`${variable}: not a setting of ${entry} (${Object.keys(shape).join(", ")})`);
  }
  return values as { [K in keyof S]: z.output<S[K]> };
}

function twilioAccount(
  ref: ProviderRef,
  env: NodeJS.ProcessEnv,
  bare: BareAccountSettings,
  listedIn: string,
  problems: string[],
): TwilioAccount {
  const entry = `${listedIn} (${ref.name})`;
  if (!ref.account) {
    if (!bare.TWILIO_ACCOUNT_SID || !bare.TWILIO_AUTH_TOKEN)
      problems.push(`TWILIO_ACCOUNT_SID / TWILIO_AUTH_TOKEN: required by ${entry}`);
    return {
      kind: "twilio",
      name: ref.name,
      accountSid: bare.TWILIO_ACCOUNT_SID ?? "",
      authToken: bare.TWILIO_AUTH_TOKEN ?? "",
      baseUrl: bare.TWILIO_BASE_URL,
      timeoutMs: bare.TWILIO_TIMEOUT_MS,
    };
  }
  const prefix = `TWILIO_${ref.account.toUpperCase()}`;
  const s = readSettings(env, prefix, TWILIO_SETTINGS, TWILIO_REQUIRED, entry, problems);
  return {
    kind: "twilio",
    name: ref.name,
    accountSid: s.ACCOUNT_SID ?? "",
    authToken: s.AUTH_TOKEN ?? "",
    // Each account's own Twilio (a region's edge, a test stand-in), else Twilio's.
    baseUrl: s.BASE_URL ?? "https://api.twilio.com",
    timeoutMs: s.TIMEOUT_MS ?? bare.TWILIO_TIMEOUT_MS,
  };
}

function smtpAccount(
  ref: ProviderRef,
  env: NodeJS.ProcessEnv,
  bare: BareAccountSettings,
  listedIn: string,
  problems: string[],
): SmtpAccount {
  const entry = `${listedIn} (${ref.name})`;
  const s = ref.account
    ? readSettings(env, `SMTP_${ref.account.toUpperCase()}`, SMTP_SETTINGS, SMTP_REQUIRED, entry, problems)
    : undefined;
  const prefix = ref.account ? `SMTP_${ref.account.toUpperCase()}` : "SMTP";
  const host = s ? s.HOST : bare.SMTP_HOST;
  if (!s && !host) problems.push(`SMTP_HOST: required by ${entry}`);
  const user = s ? s.USER : bare.SMTP_USER;
  const password = s ? s.PASSWORD : bare.SMTP_PASSWORD;
  // The bare account's pair is checked with the main settings already.
  if (s && Boolean(user) !== Boolean(password))
    problems.push(`${prefix}_USER / ${prefix}_PASSWORD: set both or neither (${entry})`);
  const secure = s ? (s.SECURE ?? false) : bare.SMTP_SECURE;
  const requireTls = s ? (s.REQUIRE_TLS ?? false) : bare.SMTP_REQUIRE_TLS;
  const rejectUnauthorized = s ? s.TLS_REJECT_UNAUTHORIZED : bare.SMTP_TLS_REJECT_UNAUTHORIZED;
  return {
    kind: "smtp",
    name: ref.name,
    host: host ?? "",
    port: s ? (s.PORT ?? 587) : bare.SMTP_PORT,
    secure,
    requireTls,
    ...(user !== undefined && { user }),
    ...(password !== undefined && { password }),
    // As for SMTP_TLS_REJECT_UNAUTHORIZED: verified whenever it matters.
    rejectUnauthorized: rejectUnauthorized ?? (Boolean(user) || secure || requireTls),
    timeoutMs: s ? (s.TIMEOUT_MS ?? bare.SMTP_TIMEOUT_MS) : bare.SMTP_TIMEOUT_MS,
    poolSize: s ? (s.POOL_SIZE ?? bare.SMTP_POOL_SIZE) : bare.SMTP_POOL_SIZE,
  };
}

/**
 * A channel's lists with every account resolved from `env`, or the problems, each naming its
 * variable. `setting` is the list's variable (`SMS_PROVIDERS`).
 */
export function resolveProviderLists<A extends { name: string }, K extends string>(
  setting: string,
  lists: {
    order: readonly ProviderRef<K>[];
    byOrganization?: ReadonlyMap<string, readonly ProviderRef<K>[]>;
  },
  account: (ref: ProviderRef<K>, listedIn: string, problems: string[]) => A,
): { lists: ProviderLists<A>; problems: string[] } {
  const problems: string[] = [];
  const accounts = new Map<string, A>();
  const resolve = (refs: readonly ProviderRef<K>[], listedIn: string) =>
    refs.map((ref) => {
      if (!accounts.has(ref.name)) accounts.set(ref.name, account(ref, listedIn, problems));
      return ref.name;
    });
  const order = resolve(lists.order, setting);
  const byOrganization = new Map(
    [...(lists.byOrganization ?? [])].map(([id, refs]) => [id, resolve(refs, `${setting}_BY_ORGANIZATION`)]),
  );
  return { lists: { accounts: [...accounts.values()], order, byOrganization }, problems };
}

/** The resolver of an SMS list's accounts. */
export function smsAccount(env: NodeJS.ProcessEnv, bare: BareAccountSettings) {
  return (
    ref: ProviderRef<(typeof SMS_PROVIDER_KINDS)[number]>,
    listedIn: string,
    problems: string[],
  ): SmsAccount =>
    ref.kind === "twilio"
      ? twilioAccount(ref, env, bare, listedIn, problems)
      : { kind: "simulator", name: ref.name };
}

/** The resolver of an e-mail list's accounts. */
export function emailAccount(env: NodeJS.ProcessEnv, bare: BareAccountSettings) {
  return (
    ref: ProviderRef<(typeof EMAIL_PROVIDER_KINDS)[number]>,
    listedIn: string,
    problems: string[],
  ): EmailAccount =>
    ref.kind === "smtp"
      ? smtpAccount(ref, env, bare, listedIn, problems)
      : { kind: "simulator", name: ref.name };
}

/**
 * The Twilio accounts of an organization's SMS list (its own, or the default one), by name: the
 * accounts a status callback for one of its messages may come from before the account that took
 * it is known (docs/decisions/0046). `SMS_PROVIDER=twilio` is one account, `twilio`, everyone's.
 */
export function twilioAccountsOf(config: {
  SMS_PROVIDER?: string | undefined;
  SMS_PROVIDERS?: ProviderLists<SmsAccount> | undefined;
}): (organizationId: string) => readonly string[] {
  const lists = config.SMS_PROVIDERS;
  if (!lists) {
    const single = config.SMS_PROVIDER === "twilio" ? ["twilio"] : [];
    return () => single;
  }
  const twilio = new Set(lists.accounts.filter((account) => account.kind === "twilio").map((a) => a.name));
  const ofList = (order: readonly string[]) => order.filter((name) => twilio.has(name));
  const byDefault = ofList(lists.order);
  const byOrganization = new Map([...lists.byOrganization].map(([id, order]) => [id, ofList(order)]));
  return (organizationId) => byOrganization.get(organizationId.toLowerCase()) ?? byDefault;
}

/**
 * The Twilio accounts SMS may go through, with their auth tokens: a status callback is verified
 * with the token of the account that took its message (docs/decisions/0046). `SMS_PROVIDER=twilio`
 * is one account, `twilio`.
 */
export function twilioAccounts(config: {
  SMS_PROVIDER?: string | undefined;
  SMS_PROVIDERS?: ProviderLists<SmsAccount> | undefined;
  TWILIO_AUTH_TOKEN?: string | undefined;
}): Array<{ name: string; authToken: string }> {
  if (config.SMS_PROVIDERS) {
    return config.SMS_PROVIDERS.accounts.flatMap((account) =>
      account.kind === "twilio" ? [{ name: account.name, authToken: account.authToken }] : [],
    );
  }
  return config.SMS_PROVIDER === "twilio" && config.TWILIO_AUTH_TOKEN
    ? [{ name: "twilio", authToken: config.TWILIO_AUTH_TOKEN }]
    : [];
}

/**
 * A warning for the start-up log (web and worker) when `TWILIO_ACCOUNT_SID` or `TWILIO_AUTH_TOKEN`
 * is set but the account they configure, `twilio`, is in no list (docs/decisions/0046): typically
 * `SMS_PROVIDER=twilio` turned into a list that renamed it (`twilio:primary`). Status callbacks for
 * the messages it sent (Twilio reports for 72 hours) then name an account the service no longer
 * knows: refused (403), or dropped (`other_provider`) when the renamed account has the same token.
 * Undefined when there is nothing to warn about.
 */
export function unlistedTwilioAccountWarning(config: {
  SMS_PROVIDER?: string | undefined;
  SMS_PROVIDERS?: ProviderLists<SmsAccount> | undefined;
  TWILIO_ACCOUNT_SID?: string | undefined;
  TWILIO_AUTH_TOKEN?: string | undefined;
}): string | undefined {
  if (!config.TWILIO_ACCOUNT_SID && !config.TWILIO_AUTH_TOKEN) return undefined;
  if (twilioAccounts(config).some((account) => account.name === "twilio")) return undefined;
  return (
    "TWILIO_ACCOUNT_SID / TWILIO_AUTH_TOKEN are set but their account, `twilio`, is in no SMS provider list: " +
    "status callbacks for the messages it sent are refused or dropped. After renaming or retiring it, keep " +
    "`twilio` in SMS_PROVIDERS (last) for 72 hours, the time Twilio reports for, then unset these variables"
  );
}
