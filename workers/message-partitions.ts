import type postgres from "postgres";
import {
  dayTable,
  HAS_COLUMN_STATISTICS,
  partitionDayOf,
  READY_PARTITION_ROWS,
} from "../src/store/day-partitions.js";

/**
 * The partitions of `message_events` and `messages` (docs/decisions/0042), kept by every worker
 * now and then: one partition per UTC day and table, created `PARTITIONS_AHEAD_DAYS` ahead, and
 * dropped whole once the day is more than `retentionDays` old. The work is done by the SQL
 * functions of migration 0018, which the migration itself used for the existing rows; they take
 * an advisory lock, so workers running this at once take turns (the second finds nothing to do).
 * Every few seconds, a day's tables that have filled without statistics are counted by ANALYZE
 * ({@link analyseYoungDayTables}).
 */

/**
 * The day partition of `message_events` that holds the events of message `id` if it exists: the
 * UTC day of the id's first 48 bits (a UUIDv7's milliseconds, as migration 0018's
 * `message_partition_day` reads them, whatever the version), e.g. `message_events_p20261128`.
 * Undefined for an id whose bits name no day between 2000 and 9999 (another version's random bits).
 */
export function eventsPartitionOf(id: string): string | undefined {
  const day = partitionDayOf(id);
  return day === undefined ? undefined : dayTable("message_events", day);
}

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
  /** Tables dropped (two per day past retention, or a history partition of the migration's). */
  dropped: number;
  /** Whether the default partitions hold any row (ids no partition covers: never dropped by retention). */
  defaultHoldsRows: boolean;
  /** The steps that failed this run (a day's creation, or a round of drops), tried again on the next. */
  failed: Array<{ step: string; error: unknown }>;
}

/** Tables a transaction of retention drops at most: 10 days' (each holds ~25 locks until it ends). */
export const DROP_TABLES_PER_TRANSACTION = 20;

/** `YYYY-MM-DD` of the UTC day `days` after `at`'s. */
export function utcDay(at: Date, days = 0): string {
  const day = new Date(Date.UTC(at.getUTCFullYear(), at.getUTCMonth(), at.getUTCDate() + days));
  return day.toISOString().slice(0, 10);
}

/**
 * Creates the partitions from today to `aheadDays` ahead that are missing, and those of the past
 * days (still within retention) whose UUIDv7 ids the default partition holds (a day missed while
 * no worker ran), then drops those of the days before `now - retentionDays` (a message is kept at
 * least `retentionDays` days and gone less than a day later). Each table of a day created, and each round of
 * at most {@link DROP_TABLES_PER_TRANSACTION} tables dropped, is its own short transaction with a
 * lock timeout: a transaction holds the locks of the tables it made or dropped until it ends, and
 * dropping a partition takes an ACCESS EXCLUSIVE lock on its table, which must not wait behind a
 * long query while every append queues behind it. A step that fails (a lock timeout) is reported
 * in `failed` and tried again on the next run; the others go on.
 */
export async function maintainMessagePartitions(
  sql: postgres.Sql,
  options: PartitionMaintenanceOptions,
): Promise<PartitionMaintenance> {
  const aheadDays = options.aheadDays ?? PARTITIONS_AHEAD_DAYS;
  const failed: PartitionMaintenance["failed"] = [];
  const found = await sql<Array<{ day: string }>>`
    select to_char(day, 'YYYY-MM-DD') as day
    from message_partition_days_in_default(${utcDay(options.now, -options.retentionDays)}::date,
      ${utcDay(options.now, aheadDays)}::date) as day`;
  const days = new Set(found.map((row) => row.day));
  for (let day = 0; day <= aheadDays; day++) days.add(utcDay(options.now, day));

  let created = 0;
  for (const day of [...days].sort())
    for (const table of ["message_events", "messages"]) {
      try {
        created += await inShortTransaction(sql, async (tx) => {
          const [row] = await tx<Array<{ created: number }>>`
            select create_message_partition(${table}, ${day}::date) as created`;
          return row?.created ?? 0;
        });
      } catch (error) {
        failed.push({ step: `create ${table} ${day}`, error });
      }
    }

  let dropped = 0;
  const beforeDay = utcDay(options.now, -options.retentionDays);
  for (;;) {
    try {
      const round = await inShortTransaction(sql, async (tx) => {
        const [row] = await tx<Array<{ dropped: number }>>`
          select drop_message_partitions(${beforeDay}::date, ${DROP_TABLES_PER_TRANSACTION}) as dropped`;
        return row?.dropped ?? 0;
      });
      dropped += round;
      if (round < DROP_TABLES_PER_TRANSACTION) break;
    } catch (error) {
      failed.push({ step: `drop before ${beforeDay}`, error });
      break;
    }
  }

  const [state] = await sql<Array<{ holds: boolean }>>`
    select exists (select 1 from message_events_default) or exists (select 1 from messages_default) as holds`;
  return { created, dropped, defaultHoldsRows: state?.holds ?? false, failed };
}

/**
 * The day tables of yesterday, today and tomorrow (`now`'s UTC days) that hold
 * {@link READY_PARTITION_ROWS} live rows or more (by the cumulative statistics, or by what a VACUUM
 * counted) while their statistics count fewer or hold none of the columns
 * ({@link HAS_COLUMN_STATISTICS}): a day's tables minutes after midnight, a table only vacuumed,
 * or every table of a fresh database. Until they are counted, the worker's load and the webhook
 * claim read the parent tables (src/store/day-partitions.ts), planned at every execution without
 * any statistics of the column they look up: Postgres then takes `message_id = any(…)` of a
 * hundred ids for a large part of the day (5,698 rows of 20,000 in the test) and may choose a
 * bitmap or parallel scan of the day for each load. Autovacuum's ANALYZE would come, but only
 * after its naptime (a minute) and its turn among the databases, time in which a busy worker's
 * loads cost several times what they should (bench/results/2026-11-29-notes.md). Once analysed,
 * a table counts its rows and has its statistics, so it is not found again (autovacuum keeps it
 * counted from there). `analysable`: the worker's role may analyse it (owns it or the database);
 * ANALYZE would otherwise warn and skip it.
 */
const YOUNG_DAY_TABLES = `select t.name,
    pg_has_role(c.relowner, 'USAGE')
      or pg_has_role((select datdba from pg_database where datname = current_database()), 'USAGE')
      as analysable
  from unnest($1::text[]) as t(name)
  join pg_class c on c.oid = to_regclass(t.name)
  where greatest(pg_stat_get_live_tuples(c.oid), c.reltuples) >= $2
    and (c.reltuples < $2 or not ${HAS_COLUMN_STATISTICS})
  order by t.name`;

export interface YoungDayTables {
  /** Tables analysed by this run. */
  analysed: string[];
  /** Tables another ANALYZE or VACUUM held (autovacuum's, another worker's): asked about at the next run. */
  skipped: string[];
  /** Tables the worker's role may not analyse: left to autovacuum. */
  notAnalysable: string[];
}

/**
 * Runs ANALYZE on the young day tables ({@link YOUNG_DAY_TABLES}) there are, in one statement that
 * skips a table whose lock another ANALYZE or VACUUM holds (a worker beside this one, autovacuum)
 * rather than waiting for it: those are asked about again at the next run. One cheap question of
 * the catalog when there is nothing to do. These days' tables are never dropped by retention, so
 * no turn on the upkeep's lock is needed.
 */
export async function analyseYoungDayTables(sql: postgres.Sql, now: Date): Promise<YoungDayTables> {
  const tables = [-1, 0, 1].flatMap((days) => {
    const day = utcDay(now, days).replaceAll("-", "");
    return [dayTable("message_events", day), dayTable("messages", day)];
  });
  const youngNow = () =>
    sql.unsafe<Array<{ name: string; analysable: boolean }>>(YOUNG_DAY_TABLES, [
      tables,
      READY_PARTITION_ROWS,
    ]);
  const young = await youngNow();
  const notAnalysable = young.filter((table) => !table.analysable).map((table) => table.name);
  const toAnalyse = young.filter((table) => table.analysable).map((table) => table.name);
  if (toAnalyse.length === 0) return { analysed: [], skipped: [], notAnalysable };
  await sql`analyze (skip_locked) ${sql(toAnalyse)}`;
  const still = new Set((await youngNow()).map((table) => table.name));
  return {
    analysed: toAnalyse.filter((name) => !still.has(name)),
    skipped: toAnalyse.filter((name) => still.has(name)),
    notAnalysable,
  };
}

/**
 * A transaction of the upkeep: first its turn on the advisory lock the SQL functions take (waited
 * for without the lock timeout: workers at once take turns, however long the other's step takes,
 * bounded by the statement timeout), then the tables' locks, each waited for `LOCK_TIMEOUT` at most.
 */
async function inShortTransaction<T>(sql: postgres.Sql, step: (tx: postgres.TransactionSql) => Promise<T>) {
  return sql.begin(async (tx) => {
    await tx`select pg_advisory_xact_lock(hashtext('message_partitions'))`;
    await tx`select set_config('lock_timeout', ${LOCK_TIMEOUT}, true)`;
    return step(tx);
  }) as Promise<T>;
}
