import { describe, expect, it } from "vitest";
import { ConfigError, loadConfig } from "../../../src/runtime/config.js";
import {
  twilioAccounts,
  twilioAccountsOf,
  unlistedTwilioAccountWarning,
} from "../../../src/runtime/provider-accounts.js";

/** SMS_PROVIDERS, EMAIL_PROVIDERS and the organizations' lists (docs/decisions/0046). */

const ORG_A = "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b";
const ORG_B = "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5c";

const twoTwilioAccounts = {
  SMS_PROVIDERS: "twilio:primary,twilio:backup",
  TWILIO_PRIMARY_ACCOUNT_SID: "AC-primary",
  TWILIO_PRIMARY_AUTH_TOKEN: "token-primary",
  TWILIO_BACKUP_ACCOUNT_SID: "AC-backup",
  TWILIO_BACKUP_AUTH_TOKEN: "token-backup",
  TWILIO_BACKUP_BASE_URL: "http://127.0.0.1:4010",
  TWILIO_BACKUP_TIMEOUT_MS: "2500",
};

function problems(env: Record<string, string>): string {
  try {
    loadConfig({ NODE_ENV: "test", ...env });
  } catch (error) {
    expect(error).toBeInstanceOf(ConfigError);
    return (error as Error).message;
  }
  throw new Error("the configuration was accepted");
}

describe("given SMS_PROVIDERS with two named Twilio accounts", () => {
  it("then each account is read from its own variables, in order, and SMS_PROVIDER is unset", () => {
    const config = loadConfig({ NODE_ENV: "test", ...twoTwilioAccounts, TWILIO_TIMEOUT_MS: "7000" });
    expect(config.SMS_PROVIDER).toBeUndefined();
    expect(config.SMS_PROVIDERS).toEqual({
      accounts: [
        {
          kind: "twilio",
          name: "twilio:primary",
          accountSid: "AC-primary",
          authToken: "token-primary",
          baseUrl: "https://api.twilio.com",
          timeoutMs: 7000,
        },
        {
          kind: "twilio",
          name: "twilio:backup",
          accountSid: "AC-backup",
          authToken: "token-backup",
          baseUrl: "http://127.0.0.1:4010",
          timeoutMs: 2500,
        },
      ],
      order: ["twilio:primary", "twilio:backup"],
      byOrganization: new Map(),
    });
    expect(config.PROVIDER_BREAKER_FAILURES).toBe(5);
    expect(config.PROVIDER_BREAKER_COOLDOWN_MS).toBe(30_000);
    expect(twilioAccounts(config)).toEqual([
      { name: "twilio:primary", authToken: "token-primary" },
      { name: "twilio:backup", authToken: "token-backup" },
    ]);
  });

  it("then a bare `twilio` entry is the account of the unprefixed TWILIO_* settings, named twilio", () => {
    const config = loadConfig({
      NODE_ENV: "test",
      SMS_PROVIDERS: "twilio,twilio:backup",
      TWILIO_ACCOUNT_SID: "AC-main",
      TWILIO_AUTH_TOKEN: "token-main",
      TWILIO_BACKUP_ACCOUNT_SID: "AC-backup",
      TWILIO_BACKUP_AUTH_TOKEN: "token-backup",
    });
    expect(config.SMS_PROVIDERS?.accounts[0]).toMatchObject({ name: "twilio", accountSid: "AC-main" });
    expect(config.SMS_PROVIDERS?.order).toEqual(["twilio", "twilio:backup"]);
  });

  it("then a missing or bad account setting stops start-up naming the variable and the entry", () => {
    const message = problems({
      ...twoTwilioAccounts,
      TWILIO_BACKUP_AUTH_TOKEN: "",
      TWILIO_PRIMARY_TIMEOUT_MS: "5",
      TWILIO_BACKUP_BASE_URL: "not a url",
    });
    expect(message).toMatch(/TWILIO_BACKUP_AUTH_TOKEN: required by SMS_PROVIDERS \(twilio:backup\)/);
    expect(message).toMatch(/TWILIO_PRIMARY_TIMEOUT_MS: .*\(SMS_PROVIDERS \(twilio:primary\)\)/);
    expect(message).toMatch(/TWILIO_BACKUP_BASE_URL: /);
  });

  it("then a variable under an account's prefix that is no setting (a typo) stops start-up", () => {
    expect(problems({ ...twoTwilioAccounts, TWILIO_BACKUP_AUTHTOKEN: "x" })).toMatch(
      /TWILIO_BACKUP_AUTHTOKEN: not a setting of SMS_PROVIDERS \(twilio:backup\) \(ACCOUNT_SID, AUTH_TOKEN, BASE_URL, TIMEOUT_MS\)/,
    );
  });

  it("then an account named like an unprefixed setting's first word does not take that setting for its own", () => {
    const config = loadConfig({
      NODE_ENV: "test",
      SMS_PROVIDERS: "twilio:base",
      TWILIO_BASE_ACCOUNT_SID: "AC-base",
      TWILIO_BASE_AUTH_TOKEN: "token-base",
      TWILIO_BASE_URL: "https://api.twilio.com",
    });
    expect(config.SMS_PROVIDERS?.accounts[0]).toMatchObject({ name: "twilio:base", accountSid: "AC-base" });
  });

  it("then SMS_PROVIDER beside it stops start-up", () => {
    expect(problems({ ...twoTwilioAccounts, SMS_PROVIDER: "twilio" })).toMatch(
      /SMS_PROVIDERS: set SMS_PROVIDER \(one provider\) or SMS_PROVIDERS \(a list\), not both/,
    );
  });

  it("then it satisfies production's need for a named SMS provider", () => {
    const message = problems({ ...twoTwilioAccounts, NODE_ENV: "production" });
    expect(message).not.toMatch(/SMS_PROVIDER: required/);
    expect(message).toMatch(/EMAIL_PROVIDER: required when NODE_ENV=production/);
  });
});

describe("the list's syntax", () => {
  it.each([
    ["twilio:Primary", /must be <kind> or <kind>:<name> entries/],
    ["twilio:pri_mary", /must be <kind> or <kind>:<name> entries/],
    ["twilio:", /must be <kind> or <kind>:<name> entries/],
    ["twilio,,simulator", /must be <kind> or <kind>:<name> entries/],
    ["smtp:main", /"smtp:main": the kind must be one of simulator, twilio/],
    ["simulator:a,simulator:a", /"simulator:a" is listed twice/],
  ])("SMS_PROVIDERS=%s is refused", (list, expected) => {
    expect(problems({ SMS_PROVIDERS: list })).toMatch(new RegExp(`SMS_PROVIDERS: ${expected.source}`));
  });

  it("simulators need no settings: a list of two is a sandbox of failover", () => {
    const config = loadConfig({ NODE_ENV: "test", SMS_PROVIDERS: " simulator:a , simulator:b " });
    expect(config.SMS_PROVIDERS?.accounts).toEqual([
      { kind: "simulator", name: "simulator:a" },
      { kind: "simulator", name: "simulator:b" },
    ]);
  });

  it("the breaker's settings are bounded", () => {
    expect(problems({ PROVIDER_BREAKER_FAILURES: "0" })).toMatch(/PROVIDER_BREAKER_FAILURES: /);
    expect(problems({ PROVIDER_BREAKER_COOLDOWN_MS: "10" })).toMatch(/PROVIDER_BREAKER_COOLDOWN_MS: /);
  });
});

describe("given organizations' own lists", () => {
  it("then each organization's order is read, its accounts resolved with the default list's", () => {
    const config = loadConfig({
      NODE_ENV: "test",
      ...twoTwilioAccounts,
      TWILIO_ACME_ACCOUNT_SID: "AC-acme",
      TWILIO_ACME_AUTH_TOKEN: "token-acme",
      SMS_PROVIDERS_BY_ORGANIZATION: `${ORG_A.toUpperCase()}=twilio:acme,twilio:backup; ${ORG_B}=twilio:backup;`,
    });
    expect(config.SMS_PROVIDERS?.byOrganization).toEqual(
      new Map([
        [ORG_A, ["twilio:acme", "twilio:backup"]],
        [ORG_B, ["twilio:backup"]],
      ]),
    );
    expect(config.SMS_PROVIDERS?.accounts.map((account) => account.name)).toEqual([
      "twilio:primary",
      "twilio:backup",
      "twilio:acme",
    ]);
  });

  it("then a status callback for an organization's message may come only from the Twilio accounts of its own list, or the default's", () => {
    const config = loadConfig({
      NODE_ENV: "test",
      ...twoTwilioAccounts,
      SMS_PROVIDERS: "twilio:primary,simulator,twilio:backup",
      TWILIO_ACME_ACCOUNT_SID: "AC-acme",
      TWILIO_ACME_AUTH_TOKEN: "token-acme",
      SMS_PROVIDERS_BY_ORGANIZATION: `${ORG_A}=twilio:acme,simulator`,
    });
    const of = twilioAccountsOf(config);
    expect(of(ORG_A.toUpperCase())).toEqual(["twilio:acme"]);
    expect(of(ORG_B)).toEqual(["twilio:primary", "twilio:backup"]);
  });

  it("then an account only they name still needs its settings, named after the variable", () => {
    expect(problems({ ...twoTwilioAccounts, SMS_PROVIDERS_BY_ORGANIZATION: `${ORG_A}=twilio:acme` })).toMatch(
      /TWILIO_ACME_ACCOUNT_SID: required by SMS_PROVIDERS_BY_ORGANIZATION \(twilio:acme\)/,
    );
  });

  it.each([
    ["not-a-uuid=twilio:backup", /must be <organization id>=<list> entries/],
    [`${ORG_A}`, /must be <organization id>=<list> entries/],
    [`${ORG_A}=twilio:backup;${ORG_A}=twilio:primary`, /organization .* is listed twice/],
    [`${ORG_A}=smtp:main`, /organization .*: "smtp:main": the kind must be one of/],
  ])("%s is refused", (value, expected) => {
    expect(problems({ ...twoTwilioAccounts, SMS_PROVIDERS_BY_ORGANIZATION: value })).toMatch(
      new RegExp(`SMS_PROVIDERS_BY_ORGANIZATION: ${expected.source}`),
    );
  });

  it("then without a default list they stop start-up", () => {
    expect(problems({ SMS_PROVIDERS_BY_ORGANIZATION: `${ORG_A}=simulator` })).toMatch(
      /SMS_PROVIDERS_BY_ORGANIZATION: only with SMS_PROVIDERS/,
    );
  });
});

describe("given EMAIL_PROVIDERS", () => {
  it("then named SMTP servers are read from SMTP_<NAME>_*, defaults from the unprefixed settings", () => {
    const config = loadConfig({
      NODE_ENV: "test",
      EMAIL_PROVIDERS: "smtp,smtp:relay2",
      SMTP_HOST: "mail.example.com",
      SMTP_USER: "u",
      SMTP_PASSWORD: "p",
      SMTP_TIMEOUT_MS: "4000",
      SMTP_RELAY2_HOST: "relay2.example.net",
      SMTP_RELAY2_PORT: "465",
      SMTP_RELAY2_SECURE: "true",
    });
    expect(config.EMAIL_PROVIDER).toBeUndefined();
    expect(config.EMAIL_PROVIDERS?.accounts).toEqual([
      {
        kind: "smtp",
        name: "smtp",
        host: "mail.example.com",
        port: 587,
        secure: false,
        requireTls: false,
        user: "u",
        password: "p",
        rejectUnauthorized: true,
        timeoutMs: 4000,
        poolSize: 5,
      },
      {
        kind: "smtp",
        name: "smtp:relay2",
        host: "relay2.example.net",
        port: 465,
        secure: true,
        requireTls: false,
        rejectUnauthorized: true,
        timeoutMs: 4000,
        poolSize: 5,
      },
    ]);
  });

  it("then a named server without a host, or with a user and no password, stops start-up", () => {
    const message = problems({
      EMAIL_PROVIDERS: "smtp:relay2,smtp:relay3",
      SMTP_RELAY3_HOST: "h",
      SMTP_RELAY3_USER: "u",
    });
    expect(message).toMatch(/SMTP_RELAY2_HOST: required by EMAIL_PROVIDERS \(smtp:relay2\)/);
    expect(message).toMatch(/SMTP_RELAY3_USER \/ SMTP_RELAY3_PASSWORD: set both or neither/);
  });

  it("then EMAIL_PROVIDER beside it stops start-up", () => {
    expect(problems({ EMAIL_PROVIDERS: "simulator:a", EMAIL_PROVIDER: "simulator" })).toMatch(
      /EMAIL_PROVIDERS: set EMAIL_PROVIDER \(one provider\) or EMAIL_PROVIDERS \(a list\), not both/,
    );
  });
});

describe("today's single provider", () => {
  it("SMS_PROVIDER=twilio is one account named twilio, and no list", () => {
    const config = loadConfig({
      NODE_ENV: "test",
      SMS_PROVIDER: "twilio",
      TWILIO_ACCOUNT_SID: "AC1",
      TWILIO_AUTH_TOKEN: "t1",
    });
    expect(config.SMS_PROVIDER).toBe("twilio");
    expect(config.SMS_PROVIDERS).toBeUndefined();
    expect(config).not.toHaveProperty("SMS_PROVIDERS_BY_ORGANIZATION");
    expect(twilioAccounts(config)).toEqual([{ name: "twilio", authToken: "t1" }]);
    expect(twilioAccountsOf(config)(ORG_A)).toEqual(["twilio"]);
  });

  it("the simulator has no Twilio account", () => {
    expect(twilioAccounts(loadConfig({ NODE_ENV: "test" }))).toEqual([]);
  });
});

describe("the account `twilio` of the unprefixed settings, renamed or dropped", () => {
  it("given TWILIO_* set and a list without `twilio`, then start-up warns: its messages' receipts would be refused for 72 hours", () => {
    const config = loadConfig({
      NODE_ENV: "test",
      ...twoTwilioAccounts,
      TWILIO_ACCOUNT_SID: "AC-old",
      TWILIO_AUTH_TOKEN: "token-old",
    });
    expect(unlistedTwilioAccountWarning(config)).toMatch(/`twilio`, is in no SMS provider list.*72 hours/);
  });

  it("given `twilio` kept in the list, or SMS_PROVIDER=twilio, or no TWILIO_* at all, then no warning", () => {
    const kept = loadConfig({
      NODE_ENV: "test",
      ...twoTwilioAccounts,
      SMS_PROVIDERS: "twilio:primary,twilio:backup,twilio",
      TWILIO_ACCOUNT_SID: "AC-old",
      TWILIO_AUTH_TOKEN: "token-old",
    });
    expect(unlistedTwilioAccountWarning(kept)).toBeUndefined();
    const single = loadConfig({
      NODE_ENV: "test",
      SMS_PROVIDER: "twilio",
      TWILIO_ACCOUNT_SID: "AC1",
      TWILIO_AUTH_TOKEN: "t1",
    });
    expect(unlistedTwilioAccountWarning(single)).toBeUndefined();
    expect(
      unlistedTwilioAccountWarning(loadConfig({ NODE_ENV: "test", ...twoTwilioAccounts })),
    ).toBeUndefined();
  });
});
