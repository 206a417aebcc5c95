import type postgres from "postgres";

/**
 * The webhook tables' purge (docs/decisions/0036), run by every worker now and then: deletes the
 * deliveries no endpoint will send (their endpoint deleted, or disabled: disabling drops them, but
 * an event written at that moment may still have added one), the attempts of deleted endpoints,
 * and attempts older than the retention. Each a chunk per statement, rows another worker is
 * deleting at the same moment skipped, so that no statement holds many locks for long.
 */

export interface WebhookPurgeOptions {
  now: Date;
  /** Attempts older than this are deleted (WEBHOOK_ATTEMPT_RETENTION_DAYS). */
  attemptRetentionMs: number;
  /** Rows deleted per statement. */
  batchSize?: number;
  /** Statements per kind of row and call at most; whatever is left waits for the next call. */
  maxBatches?: number;
}

export interface WebhookPurge {
  deliveries: number;
  attempts: number;
  expiredAttempts: number;
}

/** Endpoints looked at per call, for each table (the rest wait for the next call). */
const ENDPOINTS_PER_CALL = 1000;

/**
 * The lowest UUIDv7 of the millisecond `at`: every attempt id (a UUIDv7, src/store/webhooks.ts)
 * minted before `at` sorts below it, so old attempts are found through the primary key.
 */
export function uuidv7Floor(at: Date): string {
  const hex = Math.max(0, Math.floor(at.getTime())).toString(16).padStart(12, "0").slice(-12);
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-0000-0000-000000000000`;
}

export async function purgeWebhookRows(
  sql: postgres.Sql,
  options: WebhookPurgeOptions,
): Promise<WebhookPurge> {
  const batchSize = options.batchSize ?? 5000;
  const maxBatches = options.maxBatches ?? 100;
  // Passed as ISO strings: drizzle's driver leaves dates to the caller (the client's serializer is off).
  const cutoff = new Date(options.now.getTime() - options.attemptRetentionMs);

  // Deliveries whose endpoint is gone or disabled (an endpoint re-enabled since keeps what it got
  // since: the statement checks again), and attempts whose endpoint is gone.
  const deliveries = await purgeOrphans(sql, "webhook_deliveries", "gone or disabled", batchSize, maxBatches);
  const attempts = await purgeOrphans(sql, "webhook_attempts", "gone", batchSize, maxBatches);

  // Attempts past the retention, through the primary key (their ids are UUIDv7s, in time order).
  const expiredAttempts = await inChunks(
    batchSize,
    maxBatches,
    () => sql`
    delete from webhook_attempts
    where ctid = any(array(
      select ctid from webhook_attempts
      where id < ${uuidv7Floor(cutoff)}::uuid and attempted_at < ${cutoff.toISOString()}::timestamptz
      limit ${batchSize}
      for update skip locked
    ))`,
  );
  return { deliveries, attempts, expiredAttempts };
}

/**
 * Deletes the rows of `table` whose endpoint is `gone` (deleted) or `gone or disabled`: finds those
 * endpoints by a loose index scan of the table's `(endpoint_id, …)` index (one probe per endpoint,
 * {@link ENDPOINTS_PER_CALL} at most), then deletes their rows a chunk at a time, checking the
 * endpoint again in each statement.
 */
async function purgeOrphans(
  sql: postgres.Sql,
  table: "webhook_deliveries" | "webhook_attempts",
  endpoint: "gone" | "gone or disabled",
  batchSize: number,
  maxBatches: number,
): Promise<number> {
  const live = endpoint === "gone" ? sql`` : sql`and w.enabled`;
  const orphaned = await sql<Array<{ endpoint_id: string }>>`
    with recursive ids as (
      (select endpoint_id from ${sql(table)} order by endpoint_id limit 1)
      union all
      select n.endpoint_id from ids
      cross join lateral (
        select r.endpoint_id from ${sql(table)} r where r.endpoint_id > ids.endpoint_id
        order by r.endpoint_id limit 1) n
    )
    select ids.endpoint_id from ids
    where not exists (select 1 from webhook_endpoints w where w.id = ids.endpoint_id ${live})
    limit ${ENDPOINTS_PER_CALL}`;
  const ids = orphaned.map((row) => row.endpoint_id);
  return inChunks(
    batchSize,
    maxBatches,
    () => sql`
      delete from ${sql(table)}
      where ctid = any(array(
        select r.ctid from ${sql(table)} r
        where r.endpoint_id = any(${ids}::uuid[])
          and not exists (select 1 from webhook_endpoints w where w.id = r.endpoint_id ${live})
        limit ${batchSize}
        for update skip locked
      ))`,
    ids.length > 0,
  );
}

/** Runs `statement` until it deletes fewer than a chunk, at most `maxBatches` times; the rows deleted. */
async function inChunks(
  batchSize: number,
  maxBatches: number,
  statement: () => PromiseLike<{ count: number }>,
  when = true,
): Promise<number> {
  if (!when) return 0;
  let deleted = 0;
  for (let batch = 0; batch < maxBatches; batch++) {
    const result = await statement();
    deleted += result.count;
    if (result.count < batchSize) break;
  }
  return deleted;
}
