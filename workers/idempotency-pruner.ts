import type postgres from "postgres";
import { IDEMPOTENCY_WINDOW_MS } from "../src/store/accept-batcher.js";

/**
 * How long a key is kept past its window. A request that found a key live reads what the key
 * recorded a moment later (src/store/accept-batcher.ts); the margin makes sure the key is still
 * there when it does.
 */
export const PRUNE_MARGIN_MS = 60 * 60 * 1000;

export interface PruneOptions {
  now: Date;
  /** Keys deleted per statement. */
  batchSize?: number;
  /** Statements per call at most; whatever is left waits for the next call. */
  maxBatches?: number;
}

/**
 * Deletes the `Idempotency-Key` claims older than their 24 h window (plus the margin), a batch per
 * statement, through the `created_at` index. An expired key can already be claimed again; this
 * keeps the table, and its primary key, to about one day of keys. Rows another worker is deleting
 * at the same moment are skipped, so every worker may run it. Returns how many keys it deleted.
 */
export async function pruneIdempotencyKeys(sql: postgres.Sql, options: PruneOptions): Promise<number> {
  const batchSize = options.batchSize ?? 5000;
  const maxBatches = options.maxBatches ?? 100;
  // A string: drizzle's driver leaves dates to the caller (it turns the client's serializer off).
  const cutoff = new Date(options.now.getTime() - IDEMPOTENCY_WINDOW_MS - PRUNE_MARGIN_MS).toISOString();
  let deleted = 0;
  for (let batch = 0; batch < maxBatches; batch++) {
    // By row address (a TID scan): a join on the primary key made Postgres scan the whole table
    // once per batch. The rows are locked by the inner select, so their addresses hold.
    const result = await sql`
      delete from idempotency_keys
      where ctid = any(array(
        select ctid from idempotency_keys
        where created_at < ${cutoff}::timestamptz
        limit ${batchSize}
        for update skip locked
      ))`;
    deleted += result.count;
    if (result.count < batchSize) break;
  }
  return deleted;
}
