import type postgres from "postgres";
import type { SqlClient } from "../../db/client.js";
import type { MessageEvent } from "../domain/events.js";
import { fold } from "../domain/state.js";
import { EVENT_SELECT, type EventRow, toEvent } from "./events.js";
import { type MessageRow, toMessageRow } from "./projection.js";
import { insertRecords, recordColumns } from "./records.js";
import { runStatement } from "./statement.js";

/**
 * Rebuilds every `messages` row from `message_events`, in one transaction. The table is locked
 * for writes meanwhile; appends that arrive wait and then apply on top (their version is newer).
 * Returns the number of records written.
 */
export async function rebuildProjections(sql: postgres.Sql, pageSize = 1000): Promise<number> {
  return sql.begin(async (tx) => {
    await tx`lock table messages in exclusive mode`;
    await tx`delete from messages`;
    let written = 0;
    let after: string | undefined;
    for (;;) {
      const ids = await tx<Array<{ message_id: string }>>`
        select distinct message_id from message_events
        ${after === undefined ? tx`` : tx`where message_id > ${after}`}
        order by message_id
        limit ${pageSize}`;
      if (ids.length === 0) return written;
      const rows = await projectMessages(
        tx,
        ids.map((r) => r.message_id),
      );
      if (rows.length > 0)
        await insertRecords(
          tx,
          rows.map((row) => recordColumns(row)),
        );
      written += rows.length;
      after = ids[ids.length - 1]?.message_id;
    }
  });
}

const EVENTS_OF_MESSAGES = `select ${EVENT_SELECT} from message_events e
  where e.message_id = any($1::uuid[]) order by e.message_id, e.seq`;

/** Folds the events of the given messages into their records, without writing anything. */
async function projectMessages(sql: SqlClient, messageIds: string[]): Promise<MessageRow[]> {
  const rows = await runStatement<EventRow[]>(sql, EVENTS_OF_MESSAGES, [messageIds]);
  const byMessage = new Map<string, MessageEvent[]>();
  for (const row of rows) {
    const list = byMessage.get(row.message_id) ?? [];
    list.push(toEvent(row));
    byMessage.set(row.message_id, list);
  }
  return [...byMessage.values()].map((list) => toMessageRow(fold(list)));
}
