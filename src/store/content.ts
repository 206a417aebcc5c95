import type { SqlClient } from "../../db/client.js";
import type { MessageContent } from "../domain/events.js";
import type { Config } from "../runtime/config.js";
import {
  blindIndex,
  keyringFromConfig,
  open,
  seal,
  UnreadableContentError,
} from "../runtime/content-crypto.js";
import type { Logger } from "../runtime/logger.js";
import { type DataKey, DataKeys } from "./data-keys.js";

/**
 * A message's content at rest (docs/decisions/0034). What queries, the sweeper, the history and
 * the domain's decisions need stays in clear; the rest (recipient, body, subject, template fields
 * and merge variables, push keys and payload: whatever a channel adds) is sealed with the
 * organization's data key into one `content_enc` value, stored with the `accepted` event and
 * copied into the record. Readers that need the content open it; the others never touch it.
 *
 * Format of `content_enc`: a version byte (1), the data key's id (16 bytes), then AES-256-GCM's
 * nonce, ciphertext and tag. The authenticated data is that header with the organization and the
 * message id, so a sealed content copied to another message, or another organization's, does
 * not open.
 */

/** A field of any channel's content. */
type ContentField = MessageContent extends infer C ? (C extends unknown ? keyof C : never) : never;

/**
 * The content fields stored in clear. Every other field, including any a new channel adds, is sealed.
 * Migration 0009 (the append-only trigger's sealing exception) lists them too: change both. (An
 * SMS's `segments` and `encoding`, what acceptance measured of its body, are not personal data
 * and stay in clear too (decision 0043), as does a scheduled send's `sendAt` (decision 0044); that
 * list lacks them on purpose: it is for the events written before encryption, which none of them
 * carries.)
 */
const CLEAR_FIELDS: ReadonlySet<string> = new Set<ContentField>([
  "id",
  "organizationId",
  "productId",
  "channel",
  "priority",
  "notificationType",
  "retryEnabled",
  "sender",
  "sendAt",
  "expiresAt",
  "segments",
  "encoding",
]);

const FORMAT_VERSION = 1;
const HEADER_BYTES = 17;

/** How a content is stored: its clear part, its sealed part, its recipients' blind indexes. */
export interface StoredContent {
  /** The `accepted` event's `data`. */
  clear: Record<string, unknown>;
  /** Null once erased. */
  sealed: Buffer | null;
  recipientKeys: string[] | null;
}

/**
 * Contents the store has sealed or read sealed carry how they are stored under this symbol: a
 * record or an event written for the message carries the sealed form, never the clear one. The
 * content object itself, which a message's state keeps from its `accepted` event on, holds it:
 * a symbol-keyed property is invisible to `JSON.stringify`, `for…in` and `Object.keys`, and, unlike
 * a WeakMap entry per message, costs the garbage collector nothing (decision 0034's measurements:
 * a WeakMap's ephemerons cost microseconds per accept and per read).
 */
const STORED: unique symbol = Symbol("stored content");

type WithStored = { [STORED]?: StoredContent };

function remember(content: object, how: StoredContent): void {
  (content as WithStored)[STORED] = how;
}

/** How this content is stored, if it is stored sealed (undefined: a message from before encryption). */
export function storedContentOf(content: MessageContent): StoredContent | undefined {
  return (content as WithStored)[STORED];
}

/**
 * True when the content was sealed but is not there to read: its key destroyed (the
 * organization's data erased), its sealed part set to null (the recipient's data erased), or a
 * reader that did not open it (the history, the rebuild).
 */
export function isContentErased(content: MessageContent): boolean {
  return (
    (content as WithStored)[STORED] !== undefined &&
    typeof (content as { recipient?: unknown }).recipient !== "string"
  );
}

/** The recipients a content names, normalised as {@link normaliseRecipient} does. */
function recipientsOf(content: MessageContent): string[] {
  // One recipient, the usual case (an SMS, a push): no list to split and deduplicate.
  if (content.channel !== "email" && !content.recipient.includes(",")) {
    const recipient = normaliseRecipient(content.recipient);
    return recipient === "" ? [] : [recipient];
  }
  const recipients = content.recipient.split(",").map(normaliseRecipient);
  if (content.channel === "email") {
    for (const to of content.email.message.to) recipients.push(normaliseRecipient(to.email));
  }
  return [...new Set(recipients)].filter((recipient) => recipient !== "");
}

/** How a recipient is compared: trimmed, lower case (E.164 numbers, e-mail addresses, push endpoints). */
export function normaliseRecipient(recipient: string): string {
  return recipient.trim().toLowerCase();
}

/** A bytea value as JSON carries it to `json_to_recordset`: its text input form. */
export function byteaText(value: Buffer | null): string | null {
  return value === null ? null : `\\x${value.toString("hex")}`;
}

function keyIdBytes(id: string): Buffer {
  return Buffer.from(id.replaceAll("-", ""), "hex");
}

/**
 * Key ids by their 16 header bytes (read as latin1, one character a byte): every read opens a
 * sealed content, and a process sees few keys, so the id is spelt out once per key.
 */
const keyIds = new Map<string, string>();

function keyIdOf(sealed: Buffer): string | undefined {
  if (sealed.length < HEADER_BYTES || sealed[0] !== FORMAT_VERSION) return undefined;
  const bytes = sealed.toString("latin1", 1, HEADER_BYTES);
  let id = keyIds.get(bytes);
  if (id === undefined) {
    const hex = sealed.toString("hex", 1, HEADER_BYTES);
    id = `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
    if (keyIds.size >= 10_000) keyIds.clear();
    keyIds.set(bytes, id);
  }
  return id;
}

/** The authenticated data: the header, then `|organization|message`, written into one buffer. */
function aad(header: Buffer, organizationId: string, messageId: string): Buffer {
  const binding = `|${organizationId}|${messageId}`;
  const out = Buffer.allocUnsafe(header.length + Buffer.byteLength(binding));
  header.copy(out, 0);
  out.write(binding, header.length);
  return out;
}

/**
 * A content just sealed, with a keyed digest under the same key, for what must be compared
 * without being readable (the request hash an `Idempotency-Key` holds).
 */
export type SealedContent = StoredContent & {
  /** The data key it is sealed under. */
  keyId: string;
  requestKey: (requestHash: string) => string;
};

/** Seals contents with their organizations' keys and opens them again. */
export class ContentVault {
  /** Each key's header (format version and key id), made once. */
  readonly #headers = new Map<string, Buffer>();

  constructor(readonly keys: DataKeys) {}

  #headerOf(keyId: string): Buffer {
    let header = this.#headers.get(keyId);
    if (!header) {
      header = Buffer.alloc(HEADER_BYTES);
      header[0] = FORMAT_VERSION;
      keyIdBytes(keyId).copy(header, 1);
      if (this.#headers.size >= 10_000) this.#headers.clear();
      this.#headers.set(keyId, header);
    }
    return header;
  }

  /**
   * Seals a new message's content; from now on the store writes it in its sealed form. Also
   * gives a keyed digest under the same key, for what must be compared without being readable
   * (the request hash an `Idempotency-Key` holds).
   */
  seal(content: MessageContent): SealedContent | Promise<SealedContent> {
    const key = this.keys.current(content.organizationId);
    // A cached key (every send but an organization's first in a while) is used at once: no
    // promise and no turn of the event loop.
    return key instanceof Promise
      ? key.then((loaded) => this.#seal(content, loaded))
      : this.#seal(content, key);
  }

  #seal(content: MessageContent, key: DataKey): SealedContent {
    const clear: Record<string, unknown> = {};
    const secret: Record<string, unknown> = {};
    const fields = content as unknown as Record<string, unknown>;
    for (const name in fields) {
      if (CLEAR_FIELDS.has(name)) clear[name] = fields[name];
      else secret[name] = fields[name];
    }
    const header = this.#headerOf(key.id);
    const result: StoredContent = {
      clear,
      sealed: seal(
        key.key,
        Buffer.from(JSON.stringify(secret)),
        aad(header, content.organizationId, content.id),
        header,
      ),
      recipientKeys: recipientsOf(content).map((recipient) => blindIndex(key.indexKey, recipient)),
    };
    remember(content, result);
    return {
      clear: result.clear,
      sealed: result.sealed,
      recipientKeys: result.recipientKeys,
      keyId: key.id,
      requestKey: (requestHash: string) => blindIndex(key.indexKey, `request|${requestHash}`),
    };
  }

  /**
   * A recipient outside any message (a suppression list's entry, docs/decisions/0039): its blind
   * index under the organization's current key, as messages' `recipient_keys` have it, and the
   * recipient sealed under the same key, bound to the organization and to `binding` (so it opens
   * only where it was stored: {@link Opener.open} with the same binding).
   */
  async sealRecipient(
    organizationId: string,
    recipient: string,
    binding: (recipientKey: string) => string,
  ): Promise<{ recipientKey: string; sealed: Buffer }> {
    const key = await this.keys.current(organizationId);
    const normalised = normaliseRecipient(recipient);
    const recipientKey = blindIndex(key.indexKey, normalised);
    const header = this.#headerOf(key.id);
    const plaintext = Buffer.from(JSON.stringify({ recipient: normalised }));
    const sealed = seal(key.key, plaintext, aad(header, organizationId, binding(recipientKey)), header);
    return { recipientKey, sealed };
  }

  /** The blind indexes of a recipient under each live key of the organization (none before its first key). */
  async recipientKeys(organizationId: string, recipient: string): Promise<string[]> {
    const keys = await this.keys.liveKeys(organizationId);
    return keys.map((key) => blindIndex(key.indexKey, normaliseRecipient(recipient)));
  }

  /** Loads the keys these sealed contents need: the {@link Opener} then opens them without waiting. */
  opener(sealed: Iterable<Buffer | null | undefined>): Promise<Opener> | Opener {
    const keys = new Map<string, DataKey | null>();
    let missing: Set<string> | undefined;
    for (const value of sealed) {
      const id = value ? keyIdOf(value) : undefined;
      if (!id || keys.has(id)) continue;
      const cached = this.keys.cached(id);
      if (cached !== undefined) keys.set(id, cached);
      else {
        missing ??= new Set();
        missing.add(id);
      }
    }
    // Every key cached (every read but the first of a key in a while): no turn of the event loop.
    if (!missing) return new Opener(keys);
    return this.keys.load(missing).then((loaded) => {
      for (const [id, key] of loaded) keys.set(id, key);
      return new Opener(keys);
    });
  }
}

/** Opens sealed contents with the keys {@link ContentVault.opener} loaded for them. */
export class Opener {
  constructor(readonly keys: ReadonlyMap<string, DataKey | null>) {}

  /**
   * The sealed fields of a content, or undefined when they cannot be read: erased, or sealed with
   * a destroyed key. Throws {@link UnreadableContentError} when the key is there and the content
   * still does not open (altered, or moved from another message).
   */
  open(
    sealed: Buffer | null,
    organizationId: string,
    messageId: string,
  ): Record<string, unknown> | undefined {
    if (!sealed) return undefined;
    const keyId = keyIdOf(sealed);
    if (!keyId) throw new UnreadableContentError(`message ${messageId}: unknown content format`);
    const key = this.keys.get(keyId);
    if (key === undefined) throw new Error(`data key ${keyId} was not loaded before opening`);
    if (key === null || key.organizationId !== organizationId) return undefined;
    const header = sealed.subarray(0, HEADER_BYTES);
    const plaintext = open(key.key, sealed, aad(header, organizationId, messageId), HEADER_BYTES);
    return JSON.parse(plaintext.toString("utf8")) as Record<string, unknown>;
  }

  /**
   * The blind index of a recipient under the key this content is sealed with (the key its
   * `recipient_keys` are made with); undefined when that key is not there.
   */
  recipientKeyOf(sealed: Buffer | null, recipient: string): string | undefined {
    const keyId = sealed ? keyIdOf(sealed) : undefined;
    const key = keyId ? this.keys.get(keyId) : undefined;
    return key ? blindIndex(key.indexKey, normaliseRecipient(recipient)) : undefined;
  }
}

/**
 * An `accepted` event's content as stored: the clear `data`, with the sealed fields added when
 * `opener` is given and can open them. A content stored sealed is remembered as such (see
 * {@link storedContentOf}), whether it was opened or not; one from before encryption is `data`.
 */
export function storedContent(
  data: Record<string, unknown>,
  sealed: Buffer | null,
  recipientKeys: string[] | null,
  opener?: Opener,
): MessageContent {
  // Not sealed and not erased: a content from before encryption, its recipient in clear.
  if (!sealed && typeof data.recipient === "string") return data as unknown as MessageContent;
  const opened = opener?.open(sealed, data.organizationId as string, data.id as string);
  const content = (opened ? Object.assign({}, data, opened) : data) as unknown as MessageContent;
  remember(content, { clear: data, sealed, recipientKeys });
  return content;
}

/**
 * The vault a process makes once, at start-up, from the configuration's master keys. Warns when
 * it falls back on the public development key (never in production: the config refuses that).
 */
export function createContentVault(
  sql: SqlClient,
  config: Pick<
    Config,
    "CONTENT_MASTER_KEY" | "CONTENT_MASTER_KEY_ID" | "CONTENT_PREVIOUS_MASTER_KEYS" | "DATA_KEY_CACHE_TTL_MS"
  >,
  logger?: Pick<Logger, "warn">,
): ContentVault {
  const { keyring, development } = keyringFromConfig(config);
  if (development) {
    logger?.warn(
      "CONTENT_MASTER_KEY is unset: message content is sealed under the public development key, " +
        "which protects nothing (production refuses to start without a key of its own)",
    );
  }
  return new ContentVault(new DataKeys(sql, keyring, { cacheTtlMs: config.DATA_KEY_CACHE_TTL_MS }));
}
