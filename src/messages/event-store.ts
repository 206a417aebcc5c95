import { asc, eq, sql } from "drizzle-orm";
import type { Executor } from "../../db/client.js";
import { isUniqueViolation } from "../../db/errors.js";
import { messageEvents, messages } from "../../db/schema.js";
import { fold, type MessageEvent, type MessageState } from "../domain/message.js";
import { toMessageRow } from "./projection.js";

/** Another writer appended to the same message first; reload and decide again. */
export class ConcurrencyError extends Error {
  constructor(readonly messageId: string) {
    super(`message ${messageId} was changed concurrently`);
  }
}

export async function loadEvents(db: Executor, messageId: string): Promise<MessageEvent[]> {
  const rows = await db
    .select({
      type: messageEvents.type,
      retryCount: messageEvents.retryCount,
      occurredAt: messageEvents.occurredAt,
      data: messageEvents.data,
    })
    .from(messageEvents)
    .where(eq(messageEvents.messageId, messageId))
    .orderBy(asc(messageEvents.seq));
  return rows.map((row) => ({ ...row, occurredAt: row.occurredAt.toISOString() }) as MessageEvent);
}

export async function loadMessage(db: Executor, messageId: string): Promise<MessageState> {
  return fold(await loadEvents(db, messageId));
}

/**
 * Appends events after `state` (optimistic concurrency on `(message_id, seq)`) and updates the
 * projection in the same transaction, so the record is never behind its events. Call it inside
 * a transaction. Returns the new state.
 */
export async function appendEvents(
  tx: Executor,
  state: MessageState,
  events: readonly MessageEvent[],
): Promise<MessageState> {
  if (events.length === 0) return state;
  const next = fold(events, state);
  if (next.status === "initial") throw new Error("unreachable: events fold to a known message");
  const { id: messageId, organizationId } = next.message;
  try {
    await tx.insert(messageEvents).values(
      events.map((event, index) => ({
        messageId,
        organizationId,
        seq: state.version + index + 1,
        type: event.type,
        retryCount: event.retryCount,
        data: event.data,
        occurredAt: new Date(event.occurredAt),
      })),
    );
  } catch (error) {
    if (isUniqueViolation(error)) throw new ConcurrencyError(messageId);
    throw error;
  }
  const row = toMessageRow(next);
  const { messageId: _id, ...changes } = row;
  await tx
    .insert(messages)
    .values(row)
    .onConflictDoUpdate({
      target: messages.messageId,
      set: changes,
      setWhere: sql`${messages.version} < ${row.version}`,
    });
  return next;
}
