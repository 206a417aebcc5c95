import { randomUUID } from "node:crypto";
import type { SqlClient } from "../../db/client.js";
import {
  type HmacKey,
  indexKeyOf,
  type Keyring,
  newDataKey,
  UnreadableContentError,
} from "../runtime/content-crypto.js";

/**
 * The organizations' data keys (`organization_data_keys`): created on an organization's first
 * send, unwrapped by the keyring when first needed and then kept in the process for a while, and
 * destroyed when the organization's data is erased.
 */

export interface DataKey {
  id: string;
  organizationId: string;
  key: Buffer;
  /** The key of the recipients' blind indexes, derived from `key`. */
  indexKey: HmacKey;
}

export interface DataKeysOptions {
  /**
   * How long an unwrapped key, or the fact that a key is gone, is kept in the process. A key
   * destroyed by another process still opens content here until then (docs/decisions/0034); it
   * seals nothing new meanwhile (the accept's statement refuses it, see `DataKeys.forgetDestroyed`).
   */
  cacheTtlMs?: number;
  /** Most keys kept; the oldest go first. */
  maxCached?: number;
  now?: () => number;
}

interface Cached<T> {
  value: T;
  expiresAt: number;
}

const context = (organizationId: string, keyId: string) => `data-key v1|${organizationId}|${keyId}`;

export class DataKeys {
  readonly #sql: SqlClient;
  readonly #keyring: Keyring;
  readonly #ttlMs: number;
  readonly #maxCached: number;
  readonly #now: () => number;
  /** Unwrapped keys by id; null: destroyed or unknown. */
  readonly #byId = new Map<string, Cached<DataKey | null>>();
  /** The key each organization seals new content with. */
  readonly #current = new Map<string, Cached<DataKey>>();
  /** One look-up (or creation) at a time per organization and per key. */
  readonly #loadingCurrent = new Map<string, Promise<DataKey>>();
  readonly #loadingIds = new Map<string, Promise<Map<string, DataKey | null>>>();
  /**
   * Counts the destructions this process has made or learnt of. A load that began before one
   * read the keys as they were then: it caches nothing and reads again, so a key destroyed while
   * it was loaded is never cached as live.
   */
  #destructions = 0;

  constructor(sql: SqlClient, keyring: Keyring, options: DataKeysOptions = {}) {
    this.#sql = sql;
    this.#keyring = keyring;
    this.#ttlMs = options.cacheTtlMs ?? 60_000;
    this.#maxCached = options.maxCached ?? 10_000;
    this.#now = options.now ?? Date.now;
  }

  /** The organization's key for new content: its newest live one, made now if it has none. */
  current(organizationId: string): Promise<DataKey> | DataKey {
    const cached = this.#current.get(organizationId);
    if (cached && cached.expiresAt > this.#now()) return cached.value;
    let loading = this.#loadingCurrent.get(organizationId);
    if (!loading) {
      loading = this.#loadCurrent(organizationId).finally(() => this.#loadingCurrent.delete(organizationId));
      this.#loadingCurrent.set(organizationId, loading);
    }
    return loading;
  }

  /** A cached key: the key, null when it is destroyed or unknown, undefined when not cached. */
  cached(keyId: string): DataKey | null | undefined {
    const cached = this.#byId.get(keyId);
    return cached && cached.expiresAt > this.#now() ? cached.value : undefined;
  }

  /**
   * The keys of these ids: each a key, or null when destroyed or unknown. Those not cached are
   * loaded (and cached for the next reads), in one query.
   */
  async load(keyIds: Iterable<string>): Promise<Map<string, DataKey | null>> {
    const keys = new Map<string, DataKey | null>();
    const missing: string[] = [];
    const waits: Promise<Map<string, DataKey | null>>[] = [];
    for (const id of keyIds) {
      if (keys.has(id) || missing.includes(id)) continue;
      const cached = this.cached(id);
      if (cached !== undefined) {
        keys.set(id, cached);
        continue;
      }
      const loading = this.#loadingIds.get(id);
      if (loading) waits.push(loading);
      else missing.push(id);
    }
    if (missing.length > 0) {
      const loading = this.#loadIds(missing).finally(() => {
        for (const id of missing) this.#loadingIds.delete(id);
      });
      for (const id of missing) this.#loadingIds.set(id, loading);
      waits.push(loading);
    }
    for (const loaded of await Promise.all(waits)) for (const [id, key] of loaded) keys.set(id, key);
    return keys;
  }

  /** Every live key of the organization (a recipient's messages may be sealed with any of them). */
  async liveKeys(organizationId: string): Promise<DataKey[]> {
    const rows = await this.#sql<Array<{ id: string }>>`
      select id from organization_data_keys
      where organization_id = ${organizationId} and wrapped_key is not null`;
    const keys = await this.load(rows.map((row) => row.id));
    return [...keys.values()].filter((key): key is DataKey => key !== null);
  }

  /**
   * Destroys every key of the organization: what they sealed can no longer be opened, by any
   * process once its cache has expired, by this one at once. Returns how many were destroyed.
   */
  async destroyAll(organizationId: string): Promise<number> {
    const destroyed = await this.#sql<Array<{ id: string }>>`
      update organization_data_keys set wrapped_key = null, destroyed_at = now()
      where organization_id = ${organizationId} and wrapped_key is not null
      returning id`;
    this.#current.delete(organizationId);
    for (const [id, cached] of this.#byId) {
      if (cached.value?.organizationId === organizationId) this.#byId.delete(id);
    }
    for (const { id } of destroyed) this.#remember(id, null);
    this.#destructions++;
    return destroyed.length;
  }

  /**
   * The key was found destroyed, by another process (the accept's statement would not seal under
   * it): it is no longer any organization's current key here, and opens nothing more here. The
   * next {@link current} loads the organization's live key, or makes one.
   */
  forgetDestroyed(keyId: string): void {
    for (const [organizationId, cached] of this.#current) {
      if (cached.value.id === keyId) this.#current.delete(organizationId);
    }
    this.#remember(keyId, null);
    this.#destructions++;
  }

  async #loadCurrent(organizationId: string): Promise<DataKey> {
    // One live key per organization (a unique index): a creation that loses the race reads the winner's.
    // A destruction while it loaded (the key read may be the one destroyed): read again.
    for (;;) {
      const destructions = this.#destructions;
      const [row] = await this.#sql<Array<{ id: string; master_key_id: string; wrapped_key: Buffer }>>`
        select id, master_key_id, wrapped_key from organization_data_keys
        where organization_id = ${organizationId} and wrapped_key is not null`;
      const key = row ? await this.#unwrap(organizationId, row) : await this.#create(organizationId);
      if (!key || this.#destructions !== destructions) continue;
      this.#current.set(organizationId, { value: key, expiresAt: this.#now() + this.#ttlMs });
      this.#remember(key.id, key);
      return key;
    }
  }

  /** A new key for the organization, or undefined if another process made one first. */
  async #create(organizationId: string): Promise<DataKey | undefined> {
    const id = randomUUID();
    const key = newDataKey();
    const { masterKeyId, wrapped } = await this.#keyring.wrap(key, context(organizationId, id));
    const inserted = await this.#sql`
      insert into organization_data_keys (id, organization_id, master_key_id, wrapped_key)
      values (${id}, ${organizationId}, ${masterKeyId}, ${wrapped})
      on conflict (organization_id) where wrapped_key is not null do nothing
      returning id`;
    return inserted.length === 1 ? { id, organizationId, key, indexKey: indexKeyOf(key) } : undefined;
  }

  async #loadIds(ids: string[]): Promise<Map<string, DataKey | null>> {
    const destructions = this.#destructions;
    const rows = await this.#sql<
      Array<{ id: string; organization_id: string; master_key_id: string; wrapped_key: Buffer | null }>
    >`select id, organization_id, master_key_id, wrapped_key from organization_data_keys
      where id = any(${ids}::uuid[])`;
    const found = new Map(rows.map((row) => [row.id, row]));
    const keys = new Map<string, DataKey | null>();
    for (const id of ids) {
      const row = found.get(id);
      keys.set(id, row?.wrapped_key ? await this.#unwrap(row.organization_id, row) : null);
    }
    // A destruction while they loaded: some read live may be gone now; read again.
    if (this.#destructions !== destructions) return this.#loadIds(ids);
    for (const [id, key] of keys) this.#remember(id, key);
    return keys;
  }

  async #unwrap(
    organizationId: string,
    row: { id: string; master_key_id: string; wrapped_key: Buffer | null },
  ): Promise<DataKey> {
    if (!row.wrapped_key) throw new UnreadableContentError(`data key ${row.id} was destroyed`);
    const key = await this.#keyring.unwrap(
      row.master_key_id,
      row.wrapped_key,
      context(organizationId, row.id),
    );
    return { id: row.id, organizationId, key, indexKey: indexKeyOf(key) };
  }

  #remember(id: string, key: DataKey | null): void {
    this.#byId.delete(id);
    this.#byId.set(id, { value: key, expiresAt: this.#now() + this.#ttlMs });
    while (this.#byId.size > this.#maxCached) {
      const oldest = this.#byId.keys().next().value as string;
      this.#byId.delete(oldest);
    }
    while (this.#current.size > this.#maxCached) {
      const oldest = this.#current.keys().next().value as string;
      this.#current.delete(oldest);
    }
  }
}
