import type postgres from "postgres";

/**
 * The `status_reason` of the messages that had ended (failed or rejected) before the column
 * existed (migration 0019, docs/decisions/0044): what the projection gives them, their last such
 * event's reason, so a rebuild changes nothing. Done by the workers once, one partition of
 * `messages` per statement (row locks on that partition's ended messages, which nothing else
 * writes but a receipt), rather than by the migration, whose lock on the whole table would last
 * the whole update. Recorded in `maintenance_done` when every partition is done; a worker that
 * stops midway leaves it to the next (what is done is not done again: `status_reason is null`).
 */
const NAME = "0019-status-reasons";

/** Fills the partitions' ended messages; returns how many it filled, or undefined if it was done before. */
export async function fillStatusReasons(sql: postgres.Sql): Promise<number | undefined> {
  const [done] = await sql`select 1 from maintenance_done where name = ${NAME}`;
  if (done) return undefined;
  const partitions = await sql<Array<{ name: string }>>`
    select c.relname as name from pg_inherits i join pg_class c on c.oid = i.inhrelid
    where i.inhparent = 'messages'::regclass order by c.relname`;
  let filled = 0;
  for (const { name } of partitions) {
    const updated = await sql`
      update ${sql(name)} m set status_reason = (
        select e.data->>'reason' from message_events e
        where e.message_id = m.message_id and e.type = m.status
        order by e.seq desc limit 1)
      where m.status in ('failed', 'rejected') and m.status_reason is null`;
    filled += updated.count;
  }
  await sql`insert into maintenance_done (name, done_at) values (${NAME}, now()) on conflict do nothing`;
  return filled;
}
