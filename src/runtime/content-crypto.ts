import { createCipheriv, createDecipheriv, createHash, hash, randomBytes, randomFillSync } from "node:crypto";

/**
 * The cryptography of message content at rest (docs/decisions/0034): AES-256-GCM under a data
 * key of the message's organization, the data keys wrapped by a master key. Pure functions of
 * their inputs and Node's crypto: what is stored where is the store's business (src/store/).
 */

/** AES-256-GCM: 32-byte keys, 12-byte nonces, 16-byte tags. */
const KEY_BYTES = 32;
const NONCE_BYTES = 12;
const TAG_BYTES = 16;

/**
 * Wraps and unwraps data keys: the local implementation below holds the master keys itself; a
 * KMS (AWS KMS Encrypt/Decrypt, Vault transit) implements the same two calls. `context` binds a
 * wrapped key to what it is for (its organization and id): unwrapping it under another context
 * fails, so a wrapped key copied to another row is useless.
 */
export interface Keyring {
  wrap(dataKey: Buffer, context: string): Promise<{ masterKeyId: string; wrapped: Buffer }>;
  unwrap(masterKeyId: string, wrapped: Buffer, context: string): Promise<Buffer>;
}

/** A content key or ciphertext that does not open: wrong key, other row, or altered bytes. */
export class UnreadableContentError extends Error {}

/** `CONTENT_MASTER_KEY`: base64 of exactly 32 bytes. */
export function parseMasterKey(base64: string): Buffer | undefined {
  const key = Buffer.from(base64, "base64");
  return key.length === KEY_BYTES && key.toString("base64") === base64.trim() ? key : undefined;
}

/**
 * The key development and test runs use when `CONTENT_MASTER_KEY` is unset: fixed and public, so
 * what it protects is not protected. Production refuses to start without a key of its own.
 */
export const DEVELOPMENT_MASTER_KEY = createHash("sha256")
  .update("notification-service development content master key (not secret)")
  .digest();

/** A keyring of master keys held in the process: `current` wraps, any of `keys` unwraps. */
export class LocalKeyring implements Keyring {
  readonly #keys: ReadonlyMap<string, Buffer>;
  readonly #current: string;

  constructor(keys: ReadonlyMap<string, Buffer>, current: string) {
    if (!keys.has(current)) throw new Error(`no master key ${current}`);
    this.#keys = keys;
    this.#current = current;
  }

  async wrap(dataKey: Buffer, context: string) {
    const master = this.#keys.get(this.#current) as Buffer;
    return { masterKeyId: this.#current, wrapped: seal(master, dataKey, Buffer.from(context)) };
  }

  async unwrap(masterKeyId: string, wrapped: Buffer, context: string) {
    const master = this.#keys.get(masterKeyId);
    if (!master) throw new UnreadableContentError(`no master key ${masterKeyId} in this keyring`);
    return open(master, wrapped, Buffer.from(context));
  }
}

export function newDataKey(): Buffer {
  return randomBytes(KEY_BYTES);
}

/**
 * Random nonces drawn from a pool filled 4,096 at a time: one call to the system's generator per
 * message cost more than the encryption itself. Each nonce is used once (GCM's one rule).
 */
const NONCE_POOL = Buffer.alloc(NONCE_BYTES * 4096);
let noncesUsed = NONCE_POOL.length;

/** The next nonce, copied into `out` at `offset` (the pool is overwritten when it is refilled); returns that copy. */
function nextNonceInto(out: Buffer, offset: number): Buffer {
  if (noncesUsed === NONCE_POOL.length) {
    randomFillSync(NONCE_POOL);
    noncesUsed = 0;
  }
  NONCE_POOL.copy(out, offset, noncesUsed, noncesUsed + NONCE_BYTES);
  noncesUsed += NONCE_BYTES;
  return out.subarray(offset, offset + NONCE_BYTES);
}

const EMPTY = Buffer.alloc(0);

/**
 * `prefix ‖ nonce ‖ ciphertext ‖ tag` of `plaintext` under `key`, authenticating `aad` too (the
 * prefix, a header of the caller's, is not encrypted: put it in `aad` to authenticate it).
 */
export function seal(key: Buffer, plaintext: Buffer, aad: Buffer, prefix: Buffer = EMPTY): Buffer {
  // The output is allocated once: the prefix and the nonce are written into it, then the
  // ciphertext and the tag (GCM's ciphertext is as long as the plaintext).
  const out = Buffer.allocUnsafe(prefix.length + NONCE_BYTES + plaintext.length + TAG_BYTES);
  prefix.copy(out, 0);
  const nonce = nextNonceInto(out, prefix.length);
  const cipher = createCipheriv("aes-256-gcm", key, nonce);
  cipher.setAAD(aad);
  const body = cipher.update(plaintext);
  cipher.final();
  body.copy(out, prefix.length + NONCE_BYTES);
  cipher.getAuthTag().copy(out, out.length - TAG_BYTES);
  return out;
}

/**
 * The plaintext of {@link seal}'s output, whose first `prefixBytes` are the caller's header;
 * throws {@link UnreadableContentError} if anything differs.
 */
export function open(key: Buffer, sealed: Buffer, aad: Buffer, prefixBytes = 0): Buffer {
  if (sealed.length < prefixBytes + NONCE_BYTES + TAG_BYTES) {
    throw new UnreadableContentError("ciphertext too short");
  }
  try {
    const nonceEnd = prefixBytes + NONCE_BYTES;
    const decipher = createDecipheriv("aes-256-gcm", key, sealed.subarray(prefixBytes, nonceEnd));
    decipher.setAAD(aad);
    decipher.setAuthTag(sealed.subarray(sealed.length - TAG_BYTES));
    const plaintext = decipher.update(sealed.subarray(nonceEnd, sealed.length - TAG_BYTES));
    // GCM's final() checks the tag and returns nothing more: no second buffer to join.
    decipher.final();
    return plaintext;
  } catch {
    throw new UnreadableContentError("ciphertext does not open with this key and context");
  }
}

/**
 * An HMAC-SHA-256 key made ready: its inner and outer padded blocks (RFC 2104). An HMAC is then two
 * one-shot hashes, several times cheaper than a `createHmac` object per message.
 */
export interface HmacKey {
  inner: Buffer;
  outer: Buffer;
}

const SHA256_BLOCK = 64;

export function hmacKey(key: Buffer): HmacKey {
  const block = Buffer.alloc(SHA256_BLOCK);
  (key.length > SHA256_BLOCK ? hash("sha256", key, "buffer") : key).copy(block);
  return {
    inner: Buffer.from(block.map((byte) => byte ^ 0x36)),
    outer: Buffer.from(block.map((byte) => byte ^ 0x5c)),
  };
}

/**
 * Where {@link hmac} lays out each hash's input (the padded key, then the value or the inner
 * digest): reused, so an HMAC allocates nothing but its two digests. Grown for a longer value.
 */
let scratch = Buffer.allocUnsafe(1024);

/** HMAC-SHA-256 of `value` under a prepared key. */
export function hmac(key: HmacKey, value: string | Buffer): Buffer {
  const length = SHA256_BLOCK + (typeof value === "string" ? Buffer.byteLength(value) : value.length);
  if (scratch.length < length) scratch = Buffer.allocUnsafe(length);
  key.inner.copy(scratch, 0);
  if (typeof value === "string") scratch.write(value, SHA256_BLOCK);
  else value.copy(scratch, SHA256_BLOCK);
  const inner = hash("sha256", scratch.subarray(0, length), "buffer");
  key.outer.copy(scratch, 0);
  inner.copy(scratch, SHA256_BLOCK);
  return hash("sha256", scratch.subarray(0, SHA256_BLOCK + inner.length), "buffer");
}

/**
 * A keyed digest (HMAC-SHA-256, first 16 bytes as hex) of a value: the blind index that finds a
 * recipient's messages without storing or decrypting the recipient.
 */
export function blindIndex(indexKey: HmacKey, value: string): string {
  return hmac(indexKey, value).toString("hex", 0, 16);
}

/** The key of {@link blindIndex} derived from a data key, so one key is never used for two jobs. */
export function indexKeyOf(dataKey: Buffer): HmacKey {
  return hmacKey(hmac(hmacKey(dataKey), "recipient blind index v1"));
}

/**
 * The keyring the configuration describes: `CONTENT_MASTER_KEY` wraps new data keys, it and
 * `CONTENT_PREVIOUS_MASTER_KEYS` unwrap them. Without a master key (refused in production), the
 * public development key; `development` says so, for the caller to warn.
 */
export function keyringFromConfig(config: {
  CONTENT_MASTER_KEY?: string;
  CONTENT_MASTER_KEY_ID: string;
  CONTENT_PREVIOUS_MASTER_KEYS?: string;
}): { keyring: Keyring; development: boolean } {
  const keys = new Map<string, Buffer>();
  for (const pair of config.CONTENT_PREVIOUS_MASTER_KEYS?.split(",") ?? []) {
    const [id, key] = pair.trim().split(":");
    const parsed = key && parseMasterKey(key);
    if (id && parsed) keys.set(id, parsed);
  }
  const master = config.CONTENT_MASTER_KEY && parseMasterKey(config.CONTENT_MASTER_KEY);
  if (master) keys.set(config.CONTENT_MASTER_KEY_ID, master);
  else keys.set("development", DEVELOPMENT_MASTER_KEY);
  return {
    keyring: new LocalKeyring(keys, master ? config.CONTENT_MASTER_KEY_ID : "development"),
    development: !master,
  };
}
