import { createHmac } from "node:crypto";
import { describe, expect, it } from "vitest";
import { ConfigError, loadConfig } from "../../../src/runtime/config.js";
import {
  blindIndex,
  DEVELOPMENT_MASTER_KEY,
  hmac,
  hmacKey,
  indexKeyOf,
  keyringFromConfig,
  LocalKeyring,
  newDataKey,
  open,
  parseMasterKey,
  seal,
  UnreadableContentError,
} from "../../../src/runtime/content-crypto.js";

const aad = Buffer.from("|org-1|message-1");
const text = Buffer.from("Your code is 493027");

describe("sealing content (AES-256-GCM)", () => {
  it("opens what it sealed, and the sealed bytes hold nothing of the text", () => {
    const key = newDataKey();
    const sealed = seal(key, text, aad);
    expect(sealed.includes(Buffer.from("493027"))).toBe(false);
    expect(open(key, sealed, aad).toString()).toBe("Your code is 493027");
  });

  it("seals the same text differently each time (a fresh nonce)", () => {
    const key = newDataKey();
    expect(seal(key, text, aad).equals(seal(key, text, aad))).toBe(false);
  });

  it("given another key, then it does not open", () => {
    const sealed = seal(newDataKey(), text, aad);
    expect(() => open(newDataKey(), sealed, aad)).toThrow(UnreadableContentError);
  });

  it("given other authenticated data (another message or organization), then it does not open", () => {
    const key = newDataKey();
    const sealed = seal(key, text, aad);
    expect(() => open(key, sealed, Buffer.from("|org-1|message-2"))).toThrow(UnreadableContentError);
    expect(() => open(key, sealed, Buffer.from("|org-2|message-1"))).toThrow(UnreadableContentError);
  });

  it("given one altered byte, or a truncated value, then it does not open", () => {
    const key = newDataKey();
    const sealed = seal(key, text, aad);
    const altered = Buffer.from(sealed);
    altered[14] = (altered[14] ?? 0) ^ 1;
    expect(() => open(key, altered, aad)).toThrow(UnreadableContentError);
    expect(() => open(key, sealed.subarray(0, 20), aad)).toThrow(UnreadableContentError);
  });
});

describe("the local keyring", () => {
  const master = Buffer.alloc(32, 9);
  const keyring = new LocalKeyring(new Map([["m1", master]]), "m1");

  it("wraps a data key under the current master key and unwraps it in the same context", async () => {
    const dataKey = newDataKey();
    const { masterKeyId, wrapped } = await keyring.wrap(dataKey, "data-key v1|org|key");
    expect(masterKeyId).toBe("m1");
    expect(wrapped.includes(dataKey)).toBe(false);
    expect((await keyring.unwrap("m1", wrapped, "data-key v1|org|key")).equals(dataKey)).toBe(true);
  });

  it("refuses to unwrap in another context, under an unknown master key, or with another master key", async () => {
    const { wrapped } = await keyring.wrap(newDataKey(), "data-key v1|org|key");
    await expect(keyring.unwrap("m1", wrapped, "data-key v1|other|key")).rejects.toThrow(
      UnreadableContentError,
    );
    await expect(keyring.unwrap("m0", wrapped, "data-key v1|org|key")).rejects.toThrow(
      UnreadableContentError,
    );
    const other = new LocalKeyring(new Map([["m1", Buffer.alloc(32, 8)]]), "m1");
    await expect(other.unwrap("m1", wrapped, "data-key v1|org|key")).rejects.toThrow(UnreadableContentError);
  });

  it("after a rotation, wraps under the new master key and still unwraps under the previous one", async () => {
    const before = keyringFromConfig({
      CONTENT_MASTER_KEY: Buffer.alloc(32, 1).toString("base64"),
      CONTENT_MASTER_KEY_ID: "2025",
    }).keyring;
    const dataKey = newDataKey();
    const old = await before.wrap(dataKey, "c");
    const { keyring: after, development } = keyringFromConfig({
      CONTENT_MASTER_KEY: Buffer.alloc(32, 2).toString("base64"),
      CONTENT_MASTER_KEY_ID: "2026",
      CONTENT_PREVIOUS_MASTER_KEYS: `2025:${Buffer.alloc(32, 1).toString("base64")}`,
    });
    expect(development).toBe(false);
    expect((await after.unwrap(old.masterKeyId, old.wrapped, "c")).equals(dataKey)).toBe(true);
    expect((await after.wrap(dataKey, "c")).masterKeyId).toBe("2026");
  });

  it("without a master key, falls back on the public development key and says so", async () => {
    const { keyring: dev, development } = keyringFromConfig({ CONTENT_MASTER_KEY_ID: "1" });
    expect(development).toBe(true);
    const { masterKeyId, wrapped } = await dev.wrap(newDataKey(), "c");
    expect(masterKeyId).toBe("development");
    await expect(
      new LocalKeyring(new Map([["development", DEVELOPMENT_MASTER_KEY]]), "development").unwrap(
        masterKeyId,
        wrapped,
        "c",
      ),
    ).resolves.toHaveLength(32);
  });
});

describe("blind indexes", () => {
  it("are the same for the same recipient under one key, and differ under another", () => {
    const key = indexKeyOf(newDataKey());
    expect(blindIndex(key, "+14155550100")).toBe(blindIndex(key, "+14155550100"));
    expect(blindIndex(key, "+14155550100")).not.toBe(blindIndex(key, "+14155550101"));
    expect(blindIndex(indexKeyOf(newDataKey()), "+14155550100")).not.toBe(blindIndex(key, "+14155550100"));
  });
});

describe("CONTENT_MASTER_KEY", () => {
  const production = {
    NODE_ENV: "production",
    SMS_PROVIDER: "simulator",
    EMAIL_PROVIDER: "simulator",
    PUSH_PROVIDER: "simulator",
    WEBHOOK_SECRET_KEY: Buffer.alloc(32, 4).toString("base64"),
  };

  it("is required in production", () => {
    expect(() => loadConfig(production)).toThrow(ConfigError);
    expect(() => loadConfig(production)).toThrow(/CONTENT_MASTER_KEY: required when NODE_ENV=production/);
    expect(
      loadConfig({ ...production, CONTENT_MASTER_KEY: Buffer.alloc(32, 3).toString("base64") }),
    ).toBeTruthy();
  });

  it("must be base64 of exactly 32 bytes", () => {
    expect(() =>
      loadConfig({ NODE_ENV: "test", CONTENT_MASTER_KEY: Buffer.alloc(16).toString("base64") }),
    ).toThrow(/CONTENT_MASTER_KEY: must be base64 of exactly 32 bytes/);
    expect(() => loadConfig({ NODE_ENV: "test", CONTENT_MASTER_KEY: "not base64!" })).toThrow(
      /CONTENT_MASTER_KEY/,
    );
    expect(parseMasterKey(Buffer.alloc(32, 5).toString("base64"))).toHaveLength(32);
  });

  it("is optional outside production", () => {
    expect(loadConfig({ NODE_ENV: "development" }).CONTENT_MASTER_KEY).toBeUndefined();
  });
});

describe("the prepared HMAC", () => {
  it("is HMAC-SHA-256 (RFC 2104), for short and long keys", () => {
    for (const key of [Buffer.alloc(32, 3), Buffer.alloc(100, 4), Buffer.alloc(0)]) {
      for (const value of ["", "+14155550100", "ada@example.com".repeat(20)]) {
        expect(hmac(hmacKey(key), value).equals(createHmac("sha256", key).update(value).digest())).toBe(true);
      }
    }
  });

  it("is HMAC-SHA-256 for buffers, multi-byte text and values longer than its scratch buffer, in any order", () => {
    const key = Buffer.alloc(32, 5);
    // A long value first, then short ones: nothing of an earlier input may leak into a later one.
    for (const value of [
      "x".repeat(5000),
      "é€😀",
      Buffer.from([0, 1, 2, 255]),
      "short",
      Buffer.alloc(3000, 7),
    ]) {
      expect(hmac(hmacKey(key), value).equals(createHmac("sha256", key).update(value).digest())).toBe(true);
    }
  });
});
