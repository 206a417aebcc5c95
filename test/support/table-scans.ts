import type postgres from "postgres";

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
): Promise<{ seq_scan: number; idx_scan: number; idx_tup_read: number }> {
  const counts = async (tx: postgres.Sql) => {
    const [row] = await tx<Array<{ seq_scan: number; idx_scan: number; idx_tup_read: number }>>`
      select coalesce(t.seq_scan, 0)::int as seq_scan, coalesce(t.idx_scan, 0)::int as idx_scan,
        (select coalesce(sum(pg_stat_get_xact_tuples_returned(i.indexrelid)), 0)::int
         from pg_index i where i.indrelid = t.relid) as idx_tup_read
      from pg_stat_xact_user_tables t where t.relname = ${table}`;
    return row ?? { seq_scan: 0, idx_scan: 0, idx_tup_read: 0 };
  };
  return sql.begin(async (transaction) => {
    const tx = transaction as unknown as postgres.Sql;
    const before = await counts(tx);
    await run(tx);
    const after = await counts(tx);
    return {
      seq_scan: after.seq_scan - before.seq_scan,
      idx_scan: after.idx_scan - before.idx_scan,
      /** Index entries the scans read: a probe that finds nothing reads none. */
      idx_tup_read: after.idx_tup_read - before.idx_tup_read,
    };
  });
}

/**
 * The scans of `table` that `run` makes on `sql`, a client of one connection, when `run` begins
 * transactions of its own (which {@link scansDuring} cannot wrap): the connection's counts are
 * flushed to the cumulative view before and after (`pg_stat_force_next_flush`), so the difference
 * is what `run` did.
 */
export async function scansAcross(
  sql: postgres.Sql,
  table: string,
  run: () => Promise<unknown>,
): Promise<{ seq_scan: number; idx_scan: number; idx_tup_read: number }> {
  const counts = async () => {
    await sql`select pg_stat_force_next_flush()`;
    const [row] = await sql<Array<{ seq_scan: number; idx_scan: number; idx_tup_read: number }>>`
      select coalesce(t.seq_scan, 0)::int as seq_scan, coalesce(t.idx_scan, 0)::int as idx_scan,
        (select coalesce(sum(pg_stat_get_tuples_returned(i.indexrelid)), 0)::int
         from pg_index i where i.indrelid = t.relid) as idx_tup_read
      from pg_stat_user_tables t where t.relname = ${table}`;
    return row ?? { seq_scan: 0, idx_scan: 0, idx_tup_read: 0 };
  };
  const before = await counts();
  await run();
  const after = await counts();
  return {
    seq_scan: after.seq_scan - before.seq_scan,
    idx_scan: after.idx_scan - before.idx_scan,
    idx_tup_read: after.idx_tup_read - before.idx_tup_read,
  };
}
