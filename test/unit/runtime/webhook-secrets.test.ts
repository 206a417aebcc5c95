import { describe, expect, it } from "vitest";
import { ConfigError, loadConfig } from "../../../src/runtime/config.js";
import { newWebhookSecret, webhookSecrets } from "../../../src/runtime/webhook-secrets.js";

const production = {
  NODE_ENV: "production",
  SMS_PROVIDER: "simulator",
  EMAIL_PROVIDER: "simulator",
  PUSH_PROVIDER: "simulator",
  CONTENT_MASTER_KEY: Buffer.alloc(32, 1).toString("base64"),
};

describe("WEBHOOK_SECRET_KEY", () => {
  it("is required in production, and must be base64 of 32 bytes", () => {
    expect(() => loadConfig(production)).toThrow(ConfigError);
    expect(() => loadConfig(production)).toThrow(/WEBHOOK_SECRET_KEY: required when NODE_ENV=production/);
    expect(
      loadConfig({ ...production, WEBHOOK_SECRET_KEY: Buffer.alloc(32, 2).toString("base64") }),
    ).toBeTruthy();
    expect(() =>
      loadConfig({ NODE_ENV: "test", WEBHOOK_SECRET_KEY: Buffer.alloc(16).toString("base64") }),
    ).toThrow(/WEBHOOK_SECRET_KEY: must be base64 of exactly 32 bytes/);
  });

  it("falls back on the public development key outside production, and says so", () => {
    expect(webhookSecrets(loadConfig({ NODE_ENV: "development" })).development).toBe(true);
    expect(webhookSecrets({ WEBHOOK_SECRET_KEY: Buffer.alloc(32, 2).toString("base64") }).development).toBe(
      false,
    );
  });
});

describe("WEBHOOK_ALLOWED_HOSTS", () => {
  it("is a list of hosts, lower-cased; unset or empty: none", () => {
    expect(loadConfig({ NODE_ENV: "test" }).WEBHOOK_ALLOWED_HOSTS).toEqual([]);
    expect(loadConfig({ NODE_ENV: "test", WEBHOOK_ALLOWED_HOSTS: "" }).WEBHOOK_ALLOWED_HOSTS).toEqual([]);
    expect(
      loadConfig({ NODE_ENV: "test", WEBHOOK_ALLOWED_HOSTS: "Hooks.internal, *.svc.local,127.0.0.1:8080" })
        .WEBHOOK_ALLOWED_HOSTS,
    ).toEqual(["hooks.internal", "*.svc.local", "127.0.0.1:8080"]);
    expect(() => loadConfig({ NODE_ENV: "test", WEBHOOK_ALLOWED_HOSTS: "http://x" })).toThrow(
      /WEBHOOK_ALLOWED_HOSTS/,
    );
  });
});

describe("sealed webhook secrets", () => {
  const sealer = webhookSecrets({ WEBHOOK_SECRET_KEY: Buffer.alloc(32, 5).toString("base64") });

  it("open to the secret, only under the same key and for the same endpoint", () => {
    const secret = newWebhookSecret();
    const sealed = sealer.seal("endpoint-a", secret);
    expect(sealed.includes(Buffer.from(secret))).toBe(false);
    expect(sealer.open("endpoint-a", sealed)).toBe(secret);
    expect(() => sealer.open("endpoint-b", sealed)).toThrow();
    const other = webhookSecrets({ WEBHOOK_SECRET_KEY: Buffer.alloc(32, 6).toString("base64") });
    expect(() => other.open("endpoint-a", sealed)).toThrow();
  });

  it("are whsec_ and base64 of 32 random bytes", () => {
    const secret = newWebhookSecret();
    expect(secret).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);
    expect(newWebhookSecret()).not.toBe(secret);
  });
});
