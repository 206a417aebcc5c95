import { Resolver } from "node:dns/promises";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { loadBouncesConfig } from "../../../src/bounces/config.js";
import { BROWSER_PUSH_SERVICES, ConfigError, loadConfig } from "../../../src/runtime/config.js";
import { describeRedis } from "../../../src/runtime/redis-topology.js";

const production = {
  NODE_ENV: "production",
  SMS_PROVIDER: "simulator",
  EMAIL_PROVIDER: "simulator",
  PUSH_PROVIDER: "simulator",
  CONTENT_MASTER_KEY: Buffer.alloc(32, 1).toString("base64"),
  WEBHOOK_SECRET_KEY: Buffer.alloc(32, 2).toString("base64"),
};

function problems(env: Record<string, string>): string {
  try {
    loadConfig(env);
  } catch (error) {
    expect(error).toBeInstanceOf(ConfigError);
    return (error as Error).message;
  }
  throw new Error("the configuration was accepted");
}

describe("loadConfig: channels and their providers", () => {
  it("defaults every channel to its simulator outside production", () => {
    expect(loadConfig({ NODE_ENV: "development" })).toMatchObject({
      SMS_PROVIDER: "simulator",
      EMAIL_PROVIDER: "simulator",
      PUSH_PROVIDER: "simulator",
      VAPID_SUBJECT: "mailto:notifications@localhost",
    });
  });

  it("makes each channel's provider a choice in production, naming every missing one", () => {
    const message = problems({ NODE_ENV: "production" });
    expect(message).toMatch(/SMS_PROVIDER: required when NODE_ENV=production/);
    expect(message).toMatch(/EMAIL_PROVIDER: required when NODE_ENV=production \(simulator or smtp\)/);
    expect(message).toMatch(/PUSH_PROVIDER: required when NODE_ENV=production \(simulator or webpush\)/);
    expect(loadConfig(production).EMAIL_PROVIDER).toBe("simulator");
  });

  it("refuses smtp without a host, and a user without a password", () => {
    expect(problems({ EMAIL_PROVIDER: "smtp" })).toMatch(/SMTP_HOST: required when EMAIL_PROVIDER=smtp/);
    expect(problems({ EMAIL_PROVIDER: "smtp", SMTP_HOST: "mail", SMTP_USER: "u" })).toMatch(
      /SMTP_USER \/ SMTP_PASSWORD: set both or neither/,
    );
  });

  it("refuses webpush without both VAPID keys, and a VAPID subject that is not mailto: or https:", () => {
    expect(problems({ PUSH_PROVIDER: "webpush", VAPID_PUBLIC_KEY: "k" })).toMatch(
      /VAPID_PUBLIC_KEY \/ VAPID_PRIVATE_KEY: required when PUSH_PROVIDER=webpush/,
    );
    expect(problems({ VAPID_SUBJECT: "ops@example.com" })).toMatch(
      /VAPID_SUBJECT: must be a mailto: or https: URL/,
    );
    expect(
      loadConfig({ NODE_ENV: "development", VAPID_SUBJECT: "https://example.com/contact" }).VAPID_SUBJECT,
    ).toBe("https://example.com/contact");
  });

  it("keeps webpush to the browsers' push services in every environment; the simulator sends nowhere", () => {
    const webpush = { PUSH_PROVIDER: "webpush", VAPID_PUBLIC_KEY: "k", VAPID_PRIVATE_KEY: "p" };
    for (const NODE_ENV of ["development", "test", "production"]) {
      expect(loadConfig({ ...production, ...webpush, NODE_ENV }).PUSH_ENDPOINT_HOSTS).toEqual(
        BROWSER_PUSH_SERVICES,
      );
    }
    expect(loadConfig({ NODE_ENV: "development" }).PUSH_ENDPOINT_HOSTS).toBeNull();
    expect(loadConfig(production).PUSH_ENDPOINT_HOSTS).toEqual(BROWSER_PUSH_SERVICES);
    expect(
      loadConfig({
        ...production,
        PUSH_ENDPOINT_HOSTS: " push.example.com, *.Push.Example.net,127.0.0.1:4000",
      }).PUSH_ENDPOINT_HOSTS,
    ).toEqual(["push.example.com", "*.push.example.net", "127.0.0.1:4000"]);
    expect(problems({ PUSH_ENDPOINT_HOSTS: "https://push.example.com/" })).toMatch(
      /PUSH_ENDPOINT_HOSTS: must be host names/,
    );
  });

  it("allows no private network to outbound requests unless OUTBOUND_ALLOWED_NETWORKS lists it", () => {
    expect(loadConfig({ NODE_ENV: "development" }).OUTBOUND_ALLOWED_NETWORKS).toEqual([]);
    expect(
      loadConfig({ NODE_ENV: "development", OUTBOUND_ALLOWED_NETWORKS: "127.0.0.1, 10.0.0.0/8,::1" })
        .OUTBOUND_ALLOWED_NETWORKS,
    ).toEqual(["127.0.0.1/32", "10.0.0.0/8", "::1/128"]);
    expect(problems({ OUTBOUND_ALLOWED_NETWORKS: "10.0.0.0/8,intranet" })).toMatch(
      /OUTBOUND_ALLOWED_NETWORKS: "intranet" is not an IP network/,
    );
  });

  it("allows webhooks no private network unless WEBHOOK_ALLOWED_NETWORKS lists it, whatever push's list says", () => {
    const config = loadConfig({ NODE_ENV: "development", OUTBOUND_ALLOWED_NETWORKS: "10.0.0.0/8" });
    expect(config.WEBHOOK_ALLOWED_NETWORKS).toEqual([]);
    expect(
      loadConfig({ NODE_ENV: "development", WEBHOOK_ALLOWED_NETWORKS: "127.0.0.1" }).WEBHOOK_ALLOWED_NETWORKS,
    ).toEqual(["127.0.0.1/32"]);
    expect(problems({ WEBHOOK_ALLOWED_NETWORKS: "intranet" })).toMatch(
      /WEBHOOK_ALLOWED_NETWORKS: "intranet" is not an IP network/,
    );
  });

  it.each([
    [{}, false],
    [{ SMTP_USER: "u", SMTP_PASSWORD: "p" }, true],
    [{ SMTP_REQUIRE_TLS: "true" }, true],
    [{ SMTP_SECURE: "true" }, true],
    [{ SMTP_USER: "u", SMTP_PASSWORD: "p", SMTP_TLS_REJECT_UNAUTHORIZED: "false" }, false],
    [{ SMTP_TLS_REJECT_UNAUTHORIZED: "true" }, true],
  ])("verifies the SMTP certificate whenever it matters: %j -> %s", (env, verified) => {
    expect(
      loadConfig({ NODE_ENV: "development", EMAIL_PROVIDER: "smtp", SMTP_HOST: "mail", ...env })
        .SMTP_TLS_REJECT_UNAUTHORIZED,
    ).toBe(verified);
  });
});

describe("loadConfig: secure defaults", () => {
  it("refuses a dashboard password under 16 characters in production", () => {
    expect(problems({ ...production, ADMIN_USER: "admin", ADMIN_PASSWORD: "admin" })).toMatch(
      /ADMIN_PASSWORD: must be at least 16 characters when NODE_ENV=production/,
    );
    expect(
      loadConfig({ ...production, ADMIN_USER: "ops", ADMIN_PASSWORD: "a-sixteen-chars!" }).ADMIN_USER,
    ).toBe("ops");
  });

  it("cancels long statements and keeps the worker's metrics on loopback unless told otherwise", () => {
    expect(loadConfig(production)).toMatchObject({
      DATABASE_STATEMENT_TIMEOUT_MS: 30_000,
      WORKER_METRICS_HOST: "127.0.0.1",
    });
  });

  it("keeps the operator endpoints on the public port unless OPS_PORT is set, and the ops port on loopback", () => {
    const defaults = loadConfig({ NODE_ENV: "test" });
    expect(defaults.OPS_PORT).toBeUndefined();
    expect(defaults.OPS_HOST).toBe("127.0.0.1");
    expect(loadConfig({ NODE_ENV: "test", OPS_PORT: "" }).OPS_PORT).toBeUndefined();
    expect(loadConfig({ NODE_ENV: "test", OPS_PORT: "9465", OPS_HOST: "10.0.0.5" })).toMatchObject({
      OPS_PORT: 9465,
      OPS_HOST: "10.0.0.5",
    });
  });

  it("reads an empty SEND_RATE_BURST or TEMPLATE_PREVIEW_RATE_BURST as unset (twice the rate), as OPS_PORT", () => {
    const empty = loadConfig({ NODE_ENV: "test", SEND_RATE_BURST: "", TEMPLATE_PREVIEW_RATE_BURST: "" });
    expect(empty.SEND_RATE_BURST).toBeUndefined();
    expect(empty.TEMPLATE_PREVIEW_RATE_BURST).toBeUndefined();
    expect(loadConfig({ NODE_ENV: "test", SEND_RATE_BURST: "300" }).SEND_RATE_BURST).toBe(300);
    expect(problems({ NODE_ENV: "test", SEND_RATE_BURST: "0" })).toMatch(/SEND_RATE_BURST/);
  });

  it("refuses an OPS_PORT that is not a port, or is the public port", () => {
    expect(problems({ NODE_ENV: "test", OPS_PORT: "0" })).toMatch(/OPS_PORT/);
    expect(problems({ NODE_ENV: "test", OPS_PORT: "http" })).toMatch(/OPS_PORT/);
    expect(problems({ NODE_ENV: "test", PORT: "8080", OPS_PORT: "8080" })).toMatch(
      /OPS_PORT: must differ from PORT/,
    );
  });

  it("takes a missing NODE_ENV for production: development has to be said", () => {
    expect(problems({})).toMatch(/SMS_PROVIDER: required when NODE_ENV=production/);
    const { NODE_ENV: _, ...unsaid } = production;
    expect(loadConfig(unsaid).NODE_ENV).toBe("production");
  });
});

describe("loadConfig: verified senders", () => {
  it("requires verified senders in production (a missing NODE_ENV included), not in development or test", () => {
    const { NODE_ENV: _, ...unsaid } = production;
    expect(loadConfig(production).SENDER_VERIFICATION).toBe("required");
    expect(loadConfig(unsaid).SENDER_VERIFICATION).toBe("required");
    expect(loadConfig({ NODE_ENV: "development" }).SENDER_VERIFICATION).toBe("off");
    expect(loadConfig({ NODE_ENV: "test" }).SENDER_VERIFICATION).toBe("off");
    expect(loadConfig({ ...production, SENDER_VERIFICATION: "off" }).SENDER_VERIFICATION).toBe("off");
    expect(loadConfig({ NODE_ENV: "test", SENDER_VERIFICATION: "required" }).SENDER_VERIFICATION).toBe(
      "required",
    );
    expect(problems({ ...production, SENDER_VERIFICATION: "no" })).toMatch(/SENDER_VERIFICATION/);
  });

  it("asks the system's DNS servers unless DNS_SERVERS names some", () => {
    expect(loadConfig(production).DNS_SERVERS).toBeNull();
    expect(
      loadConfig({ ...production, DNS_SERVERS: "10.0.0.2, 127.0.0.1:5353,[::1]:53" }).DNS_SERVERS,
    ).toEqual(["10.0.0.2", "127.0.0.1:5353", "[::1]:53"]);
    expect(problems({ ...production, DNS_SERVERS: "dns.example" })).toMatch(
      /DNS_SERVERS: must be IP addresses, comma-separated/,
    );
  });

  it("takes only what Node's resolver takes, so a bad DNS_SERVERS stops start-up with a ConfigError naming it", () => {
    const good = "10.0.0.2,127.0.0.1:5353,[::1]:53,::1,[2001:db8::53],1.1.1.1:65535";
    const servers = loadConfig({ ...production, DNS_SERVERS: good }).DNS_SERVERS ?? [];
    expect(servers).toHaveLength(6);
    expect(() => new Resolver().setServers([...servers])).not.toThrow();
    for (const bad of [
      "999.1.1.1",
      "1.2.3.4.5",
      "::::::",
      "1.2.3.4:0",
      "1.2.3.4:70000",
      "[1.2.3.4]:53",
      "[::1]:",
      "::1:53:",
      "10.0.0.2,,10.0.0.3",
    ]) {
      expect(problems({ ...production, DNS_SERVERS: bad }), bad).toMatch(
        /DNS_SERVERS: must be IP addresses, comma-separated/,
      );
    }
  });
});

describe("loadConfig: PUBLIC_BASE_URL (Twilio's status callbacks, docs/decisions/0038)", () => {
  it("is unset unless given (no callbacks are asked for), and loses a trailing slash", () => {
    expect(loadConfig({ NODE_ENV: "test" }).PUBLIC_BASE_URL).toBeUndefined();
    expect(loadConfig({ NODE_ENV: "test", PUBLIC_BASE_URL: "" }).PUBLIC_BASE_URL).toBeUndefined();
    expect(
      loadConfig({ NODE_ENV: "test", PUBLIC_BASE_URL: "https://notify.example.com/x/" }).PUBLIC_BASE_URL,
    ).toBe("https://notify.example.com/x");
  });

  it("refuses anything but a plain http(s) URL", () => {
    for (const value of [
      "notify.example.com",
      "ftp://notify.example.com",
      "https://notify.example.com/?a=1",
      "https://notify.example.com/#x",
      "https://user:pw@notify.example.com",
    ]) {
      expect(problems({ NODE_ENV: "test", PUBLIC_BASE_URL: value }), value).toMatch(/PUBLIC_BASE_URL/);
    }
  });
});

describe("loadConfig: MESSAGE_RETENTION_DAYS (docs/decisions/0042)", () => {
  it("keeps messages 90 days unless told otherwise", () => {
    expect(loadConfig({ NODE_ENV: "test" }).MESSAGE_RETENTION_DAYS).toBe(90);
    expect(loadConfig({ NODE_ENV: "test", MESSAGE_RETENTION_DAYS: "30" }).MESSAGE_RETENTION_DAYS).toBe(30);
  });

  it("refuses fewer than 14 days (webhook retries and recovery still read a message), or no whole number", () => {
    for (const value of ["13", "7", "0", "-1", "1.5", "ninety"]) {
      expect(problems({ NODE_ENV: "test", MESSAGE_RETENTION_DAYS: value }), value).toMatch(
        /MESSAGE_RETENTION_DAYS/,
      );
    }
  });
});

describe("loadConfig: throughput limits (docs/decisions/0048)", () => {
  it("limits no sender and no provider account unless told to", () => {
    const config = loadConfig({ NODE_ENV: "test" });
    expect(config.SMS_SENDER_RATE).toBe(0);
    expect(config.SMS_SENDER_RATES.size).toBe(0);
    expect(config.SMS_PROVIDER_RATE).toBe(0);
    expect(config.EMAIL_PROVIDER_RATE).toBe(0);
  });

  it("takes rates as messages a second, fractions included", () => {
    const config = loadConfig({
      NODE_ENV: "test",
      SMS_SENDER_RATE: "1",
      SMS_PROVIDER_RATE: "100",
      EMAIL_PROVIDER_RATE: "0.5",
    });
    expect([config.SMS_SENDER_RATE, config.SMS_PROVIDER_RATE, config.EMAIL_PROVIDER_RATE]).toEqual([
      1, 100, 0.5,
    ]);
  });

  it("reads SMS_SENDER_RATES' sender ids as a send request does: numbers in E.164, alphanumeric ids upper-cased", () => {
    const config = loadConfig({
      NODE_ENV: "test",
      SMS_SENDER_RATES: " Acme=10, +1 (415) 555-0100 = 1 ,12345=100,MY SHOP=0.5,Bank=0",
    });
    expect([...config.SMS_SENDER_RATES]).toEqual([
      ["ACME", 10],
      ["+14155550100", 1],
      ["12345", 100],
      ["MY SHOP", 0.5],
      ["BANK", 0],
    ]);
  });

  it("refuses what is no sender id, no rate, or a sender given twice, naming the variable and the entry", () => {
    const cases: Array<[string, RegExp]> = [
      ["ACME", /SMS_SENDER_RATES: must be sender=rate pairs.*"ACME"/],
      ["ACME=10,", /SMS_SENDER_RATES: must be sender=rate pairs/],
      ["TOO LONG SENDER=1", /SMS_SENDER_RATES: "TOO LONG SENDER" is not an SMS sender id/],
      ["4155550100=1", /SMS_SENDER_RATES: "4155550100" is not an SMS sender id/],
      ["+1415555=1", /"\+1415555" is not an SMS sender id/],
      ["ACME=fast", /SMS_SENDER_RATES: ACME: must be a number/],
      ["ACME=", /SMS_SENDER_RATES: ACME: must be a number/],
      ["ACME=-1", /SMS_SENDER_RATES: ACME: must be 0 \(no limit\) or more/],
      ["ACME=1,acme=2", /SMS_SENDER_RATES: acme is given twice/],
      ["+14155550100=1,+1 415 555 0100=2", /SMS_SENDER_RATES: \+14155550100 is given twice/],
    ];
    for (const [value, expected] of cases) {
      expect(problems({ NODE_ENV: "test", SMS_SENDER_RATES: value }), value).toMatch(expected);
    }
    for (const name of ["SMS_SENDER_RATE", "SMS_PROVIDER_RATE", "EMAIL_PROVIDER_RATE"]) {
      expect(problems({ NODE_ENV: "test", [name]: "-1" })).toMatch(new RegExp(`${name}: must be 0`));
      expect(problems({ NODE_ENV: "test", [name]: "lots" })).toMatch(new RegExp(`${name}: must be a number`));
    }
  });
});

describe("loadConfig: DATABASE_READ_URL (a read replica)", () => {
  it("is unset unless given, empty included; a postgres URL is taken", () => {
    expect(loadConfig({ NODE_ENV: "test" }).DATABASE_READ_URL).toBeUndefined();
    expect(loadConfig({ NODE_ENV: "test", DATABASE_READ_URL: "" }).DATABASE_READ_URL).toBeUndefined();
    const url = "postgresql://reader@replica.internal:5432/notifications";
    expect(loadConfig({ NODE_ENV: "test", DATABASE_READ_URL: url }).DATABASE_READ_URL).toBe(url);
  });

  it("refuses what is not a postgres:// URL, naming the variable", () => {
    for (const value of ["replica.internal", "http://replica.internal/db", "redis://replica:6379"]) {
      expect(problems({ NODE_ENV: "test", DATABASE_READ_URL: value }), value).toMatch(/DATABASE_READ_URL/);
    }
  });
});

describe("loadConfig: a Postgres URL's client encoding (docs/decisions/0049)", () => {
  it("takes UTF8, spelled any way, or none", () => {
    for (const query of ["", "?client_encoding=UTF8", "?client_encoding=utf-8", "?sslmode=require"]) {
      const url = `postgres://app@db.internal:5432/notifications${query}`;
      expect(loadConfig({ NODE_ENV: "test", DATABASE_URL: url, DATABASE_READ_URL: url }).DATABASE_URL).toBe(
        url,
      );
    }
  });

  it("refuses another, as a parameter or in options, naming the variable", () => {
    for (const query of ["?client_encoding=SJIS", "?options=-c%20client_encoding%3DBIG5"]) {
      const url = `postgres://app@db.internal:5432/notifications${query}`;
      expect(problems({ NODE_ENV: "test", DATABASE_URL: url }), query).toMatch(
        /DATABASE_URL: must not set a client_encoding/,
      );
      expect(problems({ NODE_ENV: "test", DATABASE_READ_URL: url }), query).toMatch(
        /DATABASE_READ_URL: must not set/,
      );
    }
  });
});

describe("loadConfig: BOUNCE_DOMAIN (e-mail return paths, docs/decisions/0040)", () => {
  it("is unset unless given; a domain is lower-cased; the prefix defaults to `bounce`", () => {
    expect(loadConfig({ NODE_ENV: "test" }).BOUNCE_DOMAIN).toBeUndefined();
    expect(loadConfig({ NODE_ENV: "test", BOUNCE_DOMAIN: "" }).BOUNCE_DOMAIN).toBeUndefined();
    const config = loadConfig({ NODE_ENV: "test", BOUNCE_DOMAIN: "Bounces.Notify.Example.com" });
    expect(config.BOUNCE_DOMAIN).toBe("bounces.notify.example.com");
    expect(config.BOUNCE_LOCAL_PART).toBe("bounce");
    expect([config.BOUNCES_HOST, config.BOUNCES_PORT]).toEqual(["127.0.0.1", 2525]);
  });

  it("refuses what is not a domain, and a prefix that is not a plain local part", () => {
    for (const value of [
      "localhost",
      "bounce@example.com",
      "example.com.",
      "-x.example.com",
      "exa mple.com",
    ]) {
      expect(problems({ NODE_ENV: "test", BOUNCE_DOMAIN: value }), value).toMatch(/BOUNCE_DOMAIN/);
    }
    for (const value of ["a+b", "Bounce", "", "x@y"]) {
      expect(problems({ NODE_ENV: "test", BOUNCE_LOCAL_PART: value }), value).toMatch(/BOUNCE_LOCAL_PART/);
    }
  });
});

describe("loadBouncesConfig: the bounces process's own settings", () => {
  it("needs BOUNCE_DOMAIN, and in production nothing of web's and worker's (providers, keys)", () => {
    expect(() => loadBouncesConfig({ NODE_ENV: "production" })).toThrow(/BOUNCE_DOMAIN: required/);
    expect(() => loadBouncesConfig({ NODE_ENV: "production", BOUNCE_DOMAIN: "x" })).toThrow(ConfigError);
    expect(loadBouncesConfig({ NODE_ENV: "production", BOUNCE_DOMAIN: "bounces.example.com" })).toMatchObject(
      {
        BOUNCE_DOMAIN: "bounces.example.com",
        BOUNCE_LOCAL_PART: "bounce",
        BOUNCES_PORT: 2525,
        BOUNCES_HOST: "127.0.0.1",
      },
    );
  });

  it("BOUNCES_FEEDBACK_ADDRESS: an address at BOUNCE_DOMAIN (lower-cased), never one that looks like a return path", () => {
    const base = { NODE_ENV: "production", BOUNCE_DOMAIN: "bounces.example.com" };
    expect(loadBouncesConfig({ ...base, BOUNCES_FEEDBACK_ADDRESS: "FBL@Bounces.Example.com" })).toMatchObject(
      {
        BOUNCES_FEEDBACK_ADDRESS: "fbl@bounces.example.com",
      },
    );
    expect(loadBouncesConfig(base).BOUNCES_FEEDBACK_ADDRESS).toBeUndefined();
    for (const value of ["fbl", "fbl@example.com", "bounce+x@bounces.example.com"])
      expect(() => loadBouncesConfig({ ...base, BOUNCES_FEEDBACK_ADDRESS: value }), value).toThrow(
        /BOUNCES_FEEDBACK_ADDRESS/,
      );
  });

  it("BOUNCES_TLS_KEY_FILE and BOUNCES_TLS_CERT_FILE: both or neither, naming the one missing", () => {
    const base = { NODE_ENV: "production", BOUNCE_DOMAIN: "bounces.example.com" };
    expect(() => loadBouncesConfig({ ...base, BOUNCES_TLS_KEY_FILE: "/k.pem" })).toThrow(
      /BOUNCES_TLS_CERT_FILE: required when BOUNCES_TLS_KEY_FILE/,
    );
    expect(() => loadBouncesConfig({ ...base, BOUNCES_TLS_CERT_FILE: "/c.pem" })).toThrow(
      /BOUNCES_TLS_KEY_FILE: required when BOUNCES_TLS_CERT_FILE/,
    );
    expect(
      loadBouncesConfig({ ...base, BOUNCES_TLS_KEY_FILE: "/k.pem", BOUNCES_TLS_CERT_FILE: "/c.pem" }),
    ).toMatchObject({ BOUNCES_TLS_KEY_FILE: "/k.pem", BOUNCES_TLS_CERT_FILE: "/c.pem" });
  });
});

describe("loadConfig: where Redis is (REDIS_URL, a cluster, Sentinels)", () => {
  const local = { NODE_ENV: "test" };

  it("takes one Redis from REDIS_URL by default, TLS with rediss://", () => {
    expect(loadConfig(local).REDIS).toEqual({
      kind: "single",
      url: "redis://127.0.0.1:6379",
      tls: undefined,
    });
    expect(loadConfig({ ...local, REDIS_URL: "rediss://cache.example:6380" }).REDIS).toMatchObject({
      kind: "single",
      tls: {},
    });
    expect(problems({ ...local, REDIS_URL: "http://cache.example" })).toMatch(
      /REDIS_URL: must be a redis:\/\/ or rediss:\/\/ URL/,
    );
  });

  it("takes a cluster from its seed nodes, and Sentinels with the primary's name, with passwords", () => {
    expect(
      loadConfig({
        ...local,
        REDIS_CLUSTER_NODES: "10.0.0.1:7000, redis-b:7001,[::1]:7002",
        REDIS_PASSWORD: "pw",
      }).REDIS,
    ).toEqual({
      kind: "cluster",
      nodes: [
        { host: "10.0.0.1", port: 7000 },
        { host: "redis-b", port: 7001 },
        { host: "::1", port: 7002 },
      ],
      password: "pw",
      tls: undefined,
    });
    expect(
      loadConfig({
        ...local,
        REDIS_SENTINELS: "s1:26379,s2:26379",
        REDIS_SENTINEL_NAME: "mymaster",
        REDIS_USERNAME: "ntf",
        REDIS_PASSWORD: "pw",
        REDIS_SENTINEL_PASSWORD: "spw",
        REDIS_TLS: "true",
      }).REDIS,
    ).toEqual({
      kind: "sentinel",
      sentinels: [
        { host: "s1", port: 26379 },
        { host: "s2", port: 26379 },
      ],
      name: "mymaster",
      username: "ntf",
      password: "pw",
      sentinelPassword: "spw",
      tls: {},
    });
  });

  it("refuses a cluster and Sentinels together, or either beside REDIS_URL", () => {
    const both = problems({
      ...local,
      REDIS_CLUSTER_NODES: "a:1",
      REDIS_SENTINELS: "b:2",
      REDIS_SENTINEL_NAME: "m",
    });
    expect(both).toMatch(/REDIS_CLUSTER_NODES \/ REDIS_SENTINELS: set one or neither/);
    expect(problems({ ...local, REDIS_URL: "redis://x:6379", REDIS_CLUSTER_NODES: "a:1" })).toMatch(
      /REDIS_URL: unset it when REDIS_CLUSTER_NODES is set/,
    );
  });

  it("refuses Sentinels without a name, and Sentinel settings without Sentinels", () => {
    expect(problems({ ...local, REDIS_SENTINELS: "s1:26379" })).toMatch(
      /REDIS_SENTINEL_NAME: required when REDIS_SENTINELS is set/,
    );
    expect(problems({ ...local, REDIS_SENTINEL_NAME: "mymaster" })).toMatch(
      /REDIS_SENTINEL_NAME: only with REDIS_SENTINELS/,
    );
    expect(problems({ ...local, REDIS_SENTINEL_PASSWORD: "x" })).toMatch(
      /REDIS_SENTINEL_PASSWORD: only with REDIS_SENTINELS/,
    );
  });

  it("refuses node lists that are not host:port", () => {
    expect(problems({ ...local, REDIS_CLUSTER_NODES: "a:1,b" })).toMatch(
      /REDIS_CLUSTER_NODES: must be host:port entries, comma-separated \(port 1-65535\); not "b"/,
    );
    expect(problems({ ...local, REDIS_SENTINELS: "s1:70000", REDIS_SENTINEL_NAME: "m" })).toMatch(
      /REDIS_SENTINELS: must be host:port entries/,
    );
  });

  it("never repeats a password given in a node list, nor one in a malformed REDIS_URL", () => {
    const asUrl = problems({ ...local, REDIS_CLUSTER_NODES: "redis://:s3cret@h:6379" });
    expect(asUrl).toMatch(/REDIS_CLUSTER_NODES: must be host:port entries.*not "…@h:6379"/);
    expect(asUrl).not.toContain("s3cret");
    const withUser = problems({ ...local, REDIS_SENTINELS: "u:s3cret@s:1,s2", REDIS_SENTINEL_NAME: "m" });
    expect(withUser).not.toContain("s3cret");
    expect(problems({ ...local, REDIS_URL: "redis://:s3cret@h:99999" })).not.toContain("s3cret");
    expect(problems({ ...local, REDIS_URL: "http://:s3cret@h:6379" })).not.toContain("s3cret");
  });

  it("takes host names with an underscore (docker-compose service names)", () => {
    expect(loadConfig({ ...local, REDIS_CLUSTER_NODES: "redis_1:7000,redis_2:7001" }).REDIS).toMatchObject({
      kind: "cluster",
      nodes: [
        { host: "redis_1", port: 7000 },
        { host: "redis_2", port: 7001 },
      ],
    });
  });

  it("describes where Redis is for the logs without a user or password", () => {
    expect(describeRedis(loadConfig({ ...local, REDIS_URL: "redis://u:secret@cache:6380" }).REDIS)).toBe(
      "cache:6380",
    );
    expect(
      describeRedis(
        loadConfig({ ...local, REDIS_CLUSTER_NODES: "a:1,[::1]:2", REDIS_PASSWORD: "secret" }).REDIS,
      ),
    ).toBe("the cluster of a:1,[::1]:2");
    expect(
      describeRedis(loadConfig({ ...local, REDIS_SENTINELS: "s:26379", REDIS_SENTINEL_NAME: "m" }).REDIS),
    ).toBe('the primary "m" of the Sentinels s:26379');
  });

  it("refuses credentials given twice, or a user without a password", () => {
    expect(problems({ ...local, REDIS_URL: "redis://:pw@x:6379", REDIS_PASSWORD: "pw2" })).toMatch(
      /REDIS_PASSWORD: REDIS_URL carries a user or password already/,
    );
    expect(problems({ ...local, REDIS_USERNAME: "ntf" })).toMatch(/REDIS_USERNAME: needs REDIS_PASSWORD/);
  });

  it("reads the CA file with TLS, and refuses one without TLS or one it cannot read", () => {
    const dir = mkdtempSync(join(tmpdir(), "redis-ca-"));
    const ca = join(dir, "ca.pem");
    writeFileSync(ca, "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n");
    expect(
      loadConfig({ ...local, REDIS_URL: "rediss://x:6380", REDIS_TLS_CA_FILE: ca }).REDIS.tls?.ca,
    ).toContain("BEGIN CERTIFICATE");
    expect(problems({ ...local, REDIS_TLS_CA_FILE: ca })).toMatch(/REDIS_TLS_CA_FILE: needs TLS/);
    expect(problems({ ...local, REDIS_TLS: "true", REDIS_TLS_CA_FILE: join(dir, "missing.pem") })).toMatch(
      /REDIS_TLS_CA_FILE: cannot read .*missing\.pem \(ENOENT\)/,
    );
    rmSync(dir, { recursive: true });
  });
});
