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
