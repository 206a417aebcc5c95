import type { SqlClient } from "../../db/client.js";

/**
 * Runs a statement whose text the store built once, at module load, from its column lists, with
 * `$1`, `$2`… for the values. postgres.js prepares it once per connection, as it does a tagged
 * template. (A tagged template that splices the column lists in as `sql.unsafe` fragments would
 * rebuild the statement on every call, which the hot paths pay for in CPU and latency.)
 */
export function runStatement<T extends object[]>(
  sql: SqlClient,
  text: string,
  values: readonly unknown[],
): Promise<T> {
  return sql.unsafe<T>(text, values as never[], { prepare: true }) as unknown as Promise<T>;
}

/**
 * Runs a statement on a table used as a queue, whose size swings from empty to tens of thousands
 * of rows within seconds (the delivery outbox) or to millions (the scheduled sends), planned anew
 * at every call (unprepared: Postgres plans an unnamed statement with its values and the table's
 * size now). A plan Postgres made and kept while the table was empty, a sequential scan and a
 * sort, is still run once the table has filled, until the next analyze, and reads every row at
 * every call (docs/decisions/0047; test/integration/workers/queue-table-plans.test.ts). The
 * price: the planning at every call (tens of microseconds for a simple statement, 0.3 ms for the
 * webhook claim's lease), and one more round trip (postgres.js asks for the parameters' types
 * before it binds an unprepared statement).
 */
export function runStatementPlannedEachTime<T extends object[]>(
  sql: SqlClient,
  text: string,
  values: readonly unknown[],
): Promise<T> {
  return sql.unsafe<T>(text, values as never[], { prepare: false }) as unknown as Promise<T>;
}
