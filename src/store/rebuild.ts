import { asc, gt, inArray, sql } from "drizzle-orm";
import type { Database } from "../../db/client.js";
import { messageEvents, messages } from "../../db/schema.js";
import type { MessageEvent } from "../domain/events.js";
import { fold } from "../domain/state.js";
import { type MessageRow, toMessageRow } from "./projection.js";

/**
 * Rebuilds every `messages` row from `message_events`, in one transaction. The table is locked
 * for writes meanwhile; appends that arrive wait and then apply on top (their version is newer).
 * Returns the number of records written.
 */
export async function rebuildProjections(db: Database, pageSize = 1000): Promise<number> {
  return db.transaction(async (tx) => {
    await tx.execute(sql`lock table ${messages} in exclusive mode`);
    await tx.delete(messages);
    let written = 0;
    let after: string | undefined;
    for (;;) {
      const ids = await tx
        .selectDistinct({ messageId: messageEvents.messageId })
        .from(messageEvents)
        .where(after ? gt(messageEvents.messageId, after) : undefined)
        .orderBy(asc(messageEvents.messageId))
        .limit(pageSize);
      if (ids.length === 0) return written;
      const rows = await projectMessages(
        tx,
        ids.map((r) => r.messageId),
      );
      if (rows.length > 0) await tx.insert(messages).values(rows);
      written += rows.length;
      after = ids[ids.length - 1]?.messageId;
    }
  });
}

/** Folds the events of the given messages into their records, without writing anything. */
async function projectMessages(db: Pick<Database, "select">, messageIds: string[]): Promise<MessageRow[]> {
  const events = await db
    .select({
      messageId: messageEvents.messageId,
      type: messageEvents.type,
      retryCount: messageEvents.retryCount,
      occurredAt: messageEvents.occurredAt,
      data: messageEvents.data,
    })
    .from(messageEvents)
    .where(inArray(messageEvents.messageId, messageIds))
    .orderBy(asc(messageEvents.messageId), asc(messageEvents.seq));
  const byMessage = new Map<string, MessageEvent[]>();
  for (const { messageId, ...event } of events) {
    const list = byMessage.get(messageId) ?? [];
    list.push({ ...event, occurredAt: event.occurredAt.toISOString() } as MessageEvent);
    byMessage.set(messageId, list);
  }
  return [...byMessage.values()].map((list) => toMessageRow(fold(list)));
}
