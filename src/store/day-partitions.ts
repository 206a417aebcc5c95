import type { SqlClient } from "../../db/client.js";
import { runStatement } from "./statement.js";

/**
 * Reading a day partition of `messages` and `message_events` by name (docs/decisions/0042). A
 * statement on the parent tables is planned over every day partition, about a hundred of each at
 * the default 90-day retention, to prune all but the ids' days: with its ids as a constant array,
 * at every planning; joined from other rows, at every probe as it runs. The same statement on a
 * day's tables has nothing to prune. The worker's load (workers/delivery-store.ts) and the webhook
 * claim's details (src/store/webhook-deliveries.ts) read their ids' day this way when the ids are
 * all of one day and its tables are ready.
 */

const EARLIEST_DAY_MS = Date.UTC(2000, 0, 1);
/** The last millisecond of 9999-12-31. */
const LATEST_DAY_MS = Date.UTC(10000, 0, 1) - 1;

/**
 * The UTC day (`YYYYMMDD`) of the first 48 bits of message id `id`, a UUIDv7's milliseconds, as
 * migration 0018's `message_partition_day` reads them, whatever the version: the suffix of the day
 * partitions that hold the message's rows if they exist. Undefined for bits that name no day
 * between 2000 and 9999 (another version's random bits).
 */
export function partitionDayOf(id: string): string | undefined {
  const ms = Number.parseInt(`${id.slice(0, 8)}${id.slice(9, 13)}`, 16);
  if (!(ms >= EARLIEST_DAY_MS && ms <= LATEST_DAY_MS)) return undefined;
  return new Date(ms).toISOString().slice(0, 10).replaceAll("-", "");
}

/**
 * The day of `ids` when they are all UUIDv7s of one day: another version's bits name a random
 * day, whose tables seldom exist (its rows are found through the parent).
 */
export function oneDayOf(ids: readonly string[]): string | undefined {
  const first = ids[0];
  if (first === undefined || first[14] !== "7") return undefined;
  const day = partitionDayOf(first);
  if (day === undefined) return undefined;
  return ids.every((id) => id[14] === "7" && partitionDayOf(id) === day) ? day : undefined;
}

/**
 * Rows a day partition's statistics must count before a statement reads it by name. Such a
 * statement is prepared per connection, and Postgres may keep one plan for it, made from the
 * table's statistics of that moment (it did, for loads of one id and of a hundred in turn: a plan
 * for an array of unknown length costs about what their average did). Made while the day's table
 * was empty, that plan was a sequential scan, kept as the table grew
 * (`test/integration/store/load-plans.test.ts`). From this size on, the plan is the primary key's
 * and stays right as the table grows. Until autovacuum's ANALYZE has counted as much (the first
 * minutes of a day, or a quiet day), statements read the parent, planned at every execution from
 * the partitions' actual sizes.
 */
export const READY_PARTITION_ROWS = 1_000;

/** How long a day's tables found not ready are not asked about again. */
export const PARTITION_READY_RECHECK_MS = 5_000;

/**
 * Whether the table of `pg_class` row `c` has statistics of its `message_id` column (`pg_stats`,
 * which any role that may read the column sees): an ANALYZE took them, and they last as the
 * catalog does, through a crash, `pg_stat_reset()`, a failover or `pg_upgrade` (the cumulative
 * statistics' "last analysed" times do not). A VACUUM alone sets `reltuples` without them.
 */
export const HAS_COLUMN_STATISTICS = `exists (select from pg_stats s join pg_namespace n on n.nspname = s.schemaname
    where n.oid = c.relnamespace and s.tablename = c.relname and s.attname = 'message_id')`;

/**
 * The fewest rows the statistics count in the tables `$1`, null if one does not exist. A table
 * without column statistics counts -1, whatever `reltuples` says ({@link HAS_COLUMN_STATISTICS}):
 * a plan made then would take `message_id = any(…)` for a large part of the day.
 */
const PARTITION_ROWS = `select case when bool_and(c.oid is not null) then min(
    case when ${HAS_COLUMN_STATISTICS} then c.reltuples else -1 end)::float8 end as rows
  from unnest($1::text[]) as t(name) left join pg_class c on c.oid = to_regclass(t.name)`;

/** Which day tables are ready to be read by name, asked of Postgres once per table set (again after a while if not). */
export interface DayTables {
  /** Whether every table of `tables` exists, has column statistics, and counts at least {@link READY_PARTITION_ROWS} rows. */
  ready(tables: readonly string[]): boolean | Promise<boolean>;
  /** Forgets what is known of `tables` (one was dropped since: retention): asked about again. */
  forget(tables: readonly string[]): void;
}

/** One per process and purpose: what it learns is kept for good once ready, for a few seconds if not. */
export function createDayTables(sql: SqlClient, now: () => number = Date.now): DayTables {
  const known = new Map<string, { ready: boolean; askAfter: number }>();
  const asking = new Map<string, Promise<boolean>>();
  const ask = async (key: string, tables: readonly string[]): Promise<boolean> => {
    const [row] = await runStatement<Array<{ rows: number | null }>>(sql, PARTITION_ROWS, [tables]);
    const ready = row?.rows != null && row.rows >= READY_PARTITION_ROWS;
    if (known.size >= 1_000) known.clear();
    known.set(key, {
      ready,
      askAfter: ready ? Number.POSITIVE_INFINITY : now() + PARTITION_READY_RECHECK_MS,
    });
    return ready;
  };
  return {
    ready(tables) {
      const key = tables.join(",");
      const entry = known.get(key);
      if (entry && entry.askAfter > now()) return entry.ready;
      let answer = asking.get(key);
      if (!answer) {
        answer = ask(key, tables).finally(() => asking.delete(key));
        asking.set(key, answer);
      }
      return answer;
    },
    forget(tables) {
      known.delete(tables.join(","));
    },
  };
}

/** The name of `table`'s partition of `day` (`YYYYMMDD`), as migration 0018 names them. */
export function dayTable(table: "messages" | "message_events", day: string): string {
  return `${table}_p${day}`;
}

/**
 * `statement` with every `from`/`join` of `messages` or `message_events` (followed by its alias)
 * on that table's partition of `day` instead.
 */
export function onDayTables(statement: string, day: string): string {
  return statement.replace(
    /\b(from|join) (messages|message_events) /g,
    (_, keyword, table: "messages" | "message_events") => `${keyword} ${dayTable(table, day)} `,
  );
}
