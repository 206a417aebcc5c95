import type postgres from "postgres";

/**
 * The partitions of `message_events` and `messages` (docs/decisions/0042), kept by every worker
 * now and then: one partition per UTC day and table, created `PARTITIONS_AHEAD_DAYS` ahead, and
 * dropped whole once the day is more than `retentionDays` old. The work is done by the SQL
 * functions of migration 0018, which the migration itself used for the existing rows; they take
 * an advisory lock, so workers running this at once take turns (the second finds nothing to do).
 */

/** Days of partitions made ahead of today: a week without a worker before an id lands in the default partition. */
export const PARTITIONS_AHEAD_DAYS = 7;

/** How long a statement here waits for a table's lock before giving up until the next run. */
const LOCK_TIMEOUT = "1s";

export interface PartitionMaintenanceOptions {
  now: Date;
  /** MESSAGE_RETENTION_DAYS: days whose partitions are older than this are dropped. */
  retentionDays: number;
  aheadDays?: number;
}

export interface PartitionMaintenance {
  /** Tables created (two per day: one of each table). */
  created: number;
  /** Tables dropped (two per day past retention). */
  dropped: number;
  /** Whether the default partitions hold any row (ids no day partition covers: never dropped by retention). */
  defaultHoldsRows: boolean;
}

/** `YYYY-MM-DD` of the UTC day `days` after `at`'s. */
export function utcDay(at: Date, days = 0): string {
  const day = new Date(Date.UTC(at.getUTCFullYear(), at.getUTCMonth(), at.getUTCDate() + days));
  return day.toISOString().slice(0, 10);
}

/**
 * Creates the partitions from today to `aheadDays` ahead that are missing, then drops those of the
 * days before `now - retentionDays` (a message is kept at least `retentionDays` days and gone less
 * than a day later). Each step is its own short transaction with a lock timeout: dropping a
 * partition takes an ACCESS EXCLUSIVE lock on its table, which must not wait behind a long query
 * while every append queues behind it; a step that times out is tried again on the next run.
 */
export async function maintainMessagePartitions(
  sql: postgres.Sql,
  options: PartitionMaintenanceOptions,
): Promise<PartitionMaintenance> {
  const aheadDays = options.aheadDays ?? PARTITIONS_AHEAD_DAYS;
  const created = await sql.begin(async (tx) => {
    await tx`select set_config('lock_timeout', ${LOCK_TIMEOUT}, true)`;
    const [row] = await tx<Array<{ created: number }>>`
      select create_message_partitions(${utcDay(options.now)}::date, ${utcDay(options.now, aheadDays)}::date) as created`;
    return row?.created ?? 0;
  });
  const dropped = await sql.begin(async (tx) => {
    await tx`select set_config('lock_timeout', ${LOCK_TIMEOUT}, true)`;
    const [row] = await tx<Array<{ dropped: number }>>`
      select drop_message_partitions(${utcDay(options.now, -options.retentionDays)}::date) as dropped`;
    return row?.dropped ?? 0;
  });
  const [state] = await sql<Array<{ holds: boolean }>>`
    select exists (select 1 from message_events_default) or exists (select 1 from messages_default) as holds`;
  return { created, dropped, defaultHoldsRows: state?.holds ?? false };
}
