import type postgres from "postgres";

export interface TableScans {
  seq_scan: number;
  idx_scan: number;
  /** Index entries the scans read: a probe that finds nothing reads none. */
  idx_tup_read: number;
}

/**
 * The scans of `table` counted so far, read from a statistics view and its per-index function:
 * the transaction's own (`pg_stat_xact_user_tables`) or the cumulative one (`pg_stat_user_tables`).
 */
async function countScans(
  sql: postgres.Sql,
  table: string,
  source: "transaction" | "cumulative",
): Promise<TableScans> {
  const [view, tuplesReturned] =
    source === "transaction"
      ? ["pg_stat_xact_user_tables", "pg_stat_get_xact_tuples_returned"]
      : ["pg_stat_user_tables", "pg_stat_get_tuples_returned"];
  const [row] = await sql.unsafe<TableScans[]>(
    `select coalesce(t.seq_scan, 0)::int as seq_scan, coalesce(t.idx_scan, 0)::int as idx_scan,
       (select coalesce(sum(${tuplesReturned}(i.indexrelid)), 0)::int
        from pg_index i where i.indrelid = t.relid) as idx_tup_read
     from ${view} t where t.relname = $1`,
    [table],
  );
  return row ?? { seq_scan: 0, idx_scan: 0, idx_tup_read: 0 };
}

function difference(before: TableScans, after: TableScans): TableScans {
  return {
    seq_scan: after.seq_scan - before.seq_scan,
    idx_scan: after.idx_scan - before.idx_scan,
    idx_tup_read: after.idx_tup_read - before.idx_tup_read,
  };
}

/**
 * The scans of `table` that `run` makes, all in one transaction of `sql` (a connection's own: the
 * view counts what the connection has not yet reported, which a transaction never does midway, so
 * earlier statements' scans may be in it too, hence the difference). Tests of the plans Postgres
 * makes for the hot statements count them.
 */
export async function scansDuring(
  sql: postgres.Sql,
  table: string,
  run: (tx: postgres.Sql) => Promise<unknown>,
): Promise<TableScans> {
  return sql.begin(async (transaction) => {
    const tx = transaction as unknown as postgres.Sql;
    const before = await countScans(tx, table, "transaction");
    await run(tx);
    return difference(before, await countScans(tx, table, "transaction"));
  });
}

/**
 * The scans of `table` that `run` makes on `sql` when `run` begins transactions of its own (which
 * {@link scansDuring} cannot wrap): the connection's counts are flushed to the cumulative view
 * before and after (`pg_stat_force_next_flush`), so the difference is what `run` did. `sql` must
 * be a client of one connection: a flush reaches only the connection it runs on, so what `run` did
 * on another would be counted late, or not at all.
 */
export async function scansAcross(
  sql: postgres.Sql,
  table: string,
  run: () => Promise<unknown>,
): Promise<TableScans> {
  if (sql.options.max !== 1) throw new Error("scansAcross needs a client of one connection");
  const counts = async () => {
    await sql`select pg_stat_force_next_flush()`;
    return countScans(sql, table, "cumulative");
  };
  const before = await counts();
  await run();
  return difference(before, await counts());
}
