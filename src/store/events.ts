import type postgres from "postgres";
import type { Executor } from "../../db/client.js";
import { driverOf } from "../../db/driver.js";
import { isUniqueViolation } from "../../db/errors.js";
import type { MessageEvent } from "../domain/events.js";
import { fold, type MessageState } from "../domain/state.js";
import { recordColumns, toMessageRow } from "./projection.js";

/** Another writer appended to the same message first; reload and decide again. */
export class ConcurrencyError extends Error {
  constructor(readonly messageId: string) {
    super(`message ${messageId} was changed concurrently`);
  }
}

export async function loadEvents(db: Executor, messageId: string): Promise<MessageEvent[]> {
  // occurred_at as the ISO 8601 text events carry (drizzle leaves the driver's date parsing off).
  const rows = await driverOf(db)<
    Array<{ type: MessageEvent["type"]; retry_count: number; occurred_at: string; data: unknown }>
  >`
    select type, retry_count, data,
      to_char(occurred_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') as occurred_at
    from message_events where message_id = ${messageId} order by seq`;
  return rows.map(
    (row) =>
      ({
        type: row.type,
        retryCount: row.retry_count,
        occurredAt: row.occurred_at,
        data: row.data,
      }) as MessageEvent,
  );
}

export async function loadMessage(db: Executor, messageId: string): Promise<MessageState> {
  return fold(await loadEvents(db, messageId));
}

/** One message's append: the events after `state`, and the record they fold to. */
interface Append {
  state: MessageState;
  events: readonly MessageEvent[];
}

/**
 * Appends events after `state` (optimistic concurrency on `(message_id, seq)`) and updates the
 * projection, in one statement: atomic on its own, so the record is never behind its events,
 * and it may run inside a transaction or outside one (one round trip, one commit). Returns the
 * new state.
 */
export async function appendEvents(
  tx: Executor,
  state: MessageState,
  events: readonly MessageEvent[],
): Promise<MessageState> {
  if (events.length === 0) return state;
  const [next] = await writeAppends(driverOf(tx), [{ state, events }]);
  return next as MessageState;
}

/**
 * {@link appendEvents} for many messages in one statement (the worker groups the appends of its
 * concurrent jobs). Any conflict fails the whole statement: with one message that is its
 * {@link ConcurrencyError}; callers with several retry them one by one to find out which.
 */
export async function writeAppends(sql: postgres.Sql, appends: readonly Append[]): Promise<MessageState[]> {
  const events: unknown[] = [];
  const records: unknown[] = [];
  const states = appends.map(({ state, events: appended }) => {
    const next = fold(appended, state);
    if (next.status === "initial") throw new Error("unreachable: events fold to a known message");
    appended.forEach((event, index) => {
      events.push({
        message_id: next.message.id,
        organization_id: next.message.organizationId,
        seq: state.version + index + 1,
        type: event.type,
        retry_count: event.retryCount,
        data: event.data,
        occurred_at: event.occurredAt,
      });
    });
    records.push(recordColumns(toMessageRow(next)));
    return next;
  });
  try {
    // The events' INSERT runs even though nothing reads it; a unique violation fails the whole statement.
    await sql`
      with appended as (
        insert into message_events (message_id, organization_id, seq, type, retry_count, data, occurred_at)
        select message_id, organization_id, seq, type, retry_count, data, occurred_at
        from json_to_recordset(${JSON.stringify(events)}::json) as t(message_id uuid, organization_id uuid,
          seq integer, type text, retry_count integer, data jsonb, occurred_at timestamptz)
      )
      insert into messages as m (message_id, organization_id, product_id, channel, status, priority,
        notification_type, recipient, sender, body, subject, template_fields, retry_enabled, retry_count,
        version, next_attempt_at, delivery_time, created_at, updated_at)
      select message_id, organization_id, product_id, channel, status, priority,
        notification_type, recipient, sender, body, subject, template_fields, retry_enabled, retry_count,
        version, next_attempt_at, delivery_time, created_at, updated_at
      from json_to_recordset(${JSON.stringify(records)}::json) as r(message_id uuid, organization_id uuid,
        product_id text, channel text, status text, priority text, notification_type text,
        recipient text, sender text, body text, subject text, template_fields jsonb,
        retry_enabled boolean, retry_count integer, version integer, next_attempt_at timestamptz,
        delivery_time timestamptz, created_at timestamptz, updated_at timestamptz)
      on conflict (message_id) do update set
        organization_id = excluded.organization_id, product_id = excluded.product_id,
        channel = excluded.channel, status = excluded.status, priority = excluded.priority,
        notification_type = excluded.notification_type, recipient = excluded.recipient,
        sender = excluded.sender, body = excluded.body, subject = excluded.subject,
        template_fields = excluded.template_fields, retry_enabled = excluded.retry_enabled,
        retry_count = excluded.retry_count, version = excluded.version,
        next_attempt_at = excluded.next_attempt_at, delivery_time = excluded.delivery_time,
        created_at = excluded.created_at, updated_at = excluded.updated_at
      where m.version < excluded.version`;
  } catch (error) {
    const [only] = states;
    if (only && states.length === 1 && isUniqueViolation(error)) throw new ConcurrencyError(only.message.id);
    throw error;
  }
  return states;
}
