import type { SqlClient } from "../../db/client.js";
import { isUniqueViolation } from "../../db/errors.js";
import type { MessageEvent } from "../domain/events.js";
import { fold, type MessageState } from "../domain/state.js";
import { type Opener, storedContent, storedContentOf } from "./content.js";
import { toMessageRow } from "./projection.js";
import {
  insertRecordsFrom,
  REPLACE_OLDER_RECORD,
  type RecordColumns,
  recordColumns,
  recordsInput,
} from "./records.js";
import { runStatement } from "./statement.js";
import {
  insertSuppressionsFrom,
  type NewSuppression,
  SUPPRESSION_INPUT,
  suppressionRows,
} from "./suppressions.js";
import { type HandedRow, insertDeliveriesHandingOff, selectHandedDeliveries } from "./webhook-deliveries.js";

/**
 * The event store: how an event is stored (the append, with its sequence number) and read back
 * (one select list, one mapping to the domain's event). Every reader and writer of
 * `message_events` goes through here.
 */

/** Another writer appended to the same message first; reload and decide again. */
export class ConcurrencyError extends Error {
  constructor(readonly messageId: string) {
    super(`message ${messageId} was changed concurrently`);
  }
}

/** A stored event as {@link EVENT_SELECT} selects it. */
export interface EventRow {
  message_id: string;
  seq: number;
  type: MessageEvent["type"];
  retry_count: number;
  data: unknown;
  occurred_at: string;
  /** An `accepted` event's sealed content (src/store/content.ts). */
  content_enc: Buffer | null;
  recipient_keys: string[] | null;
}

/**
 * What a read selects of an event of `message_events e`: occurred_at as the ISO 8601 text events
 * carry (drizzle turns the driver's date parsing off on the shared client). Every read of events
 * selects this list and maps its rows with {@link toEvent}.
 */
export const EVENT_SELECT = `e.message_id, e.seq, e.type, e.retry_count, e.data, e.content_enc, e.recipient_keys,
  to_char(e.occurred_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') as occurred_at`;

/**
 * {@link EVENT_SELECT} without the recipients' blind indexes (null): for the worker, whose appends
 * never write a record's content columns (the accept wrote them), so it has no use for them.
 */
export const EVENT_SELECT_WITHOUT_INDEXES = EVENT_SELECT.replace(
  "e.recipient_keys",
  "null::text[] as recipient_keys",
);

/**
 * A stored event, as the domain's. An `accepted` event's sealed content is opened with `opener`
 * (`ContentVault.opener`); without one, or once erased, the event carries
 * the content's clear fields only (enough for the history and the rebuild, which show none).
 */
export function toEvent(row: EventRow, opener?: Opener): MessageEvent {
  return {
    type: row.type,
    retryCount: row.retry_count,
    occurredAt: row.occurred_at,
    data:
      row.type === "accepted"
        ? storedContent(row.data as Record<string, unknown>, row.content_enc, row.recipient_keys, opener)
        : row.data,
  } as MessageEvent;
}

export interface StoredEvent {
  seq: number;
  event: MessageEvent;
}

/**
 * A message's events in order. With `organizationId`, none when the message is another
 * organization's (exactly as for an unknown one).
 */
export async function loadEvents(
  sql: SqlClient,
  messageId: string,
  organizationId?: string,
): Promise<StoredEvent[]> {
  const rows =
    organizationId === undefined
      ? await runStatement<EventRow[]>(sql, LOAD_EVENTS, [messageId])
      : await runStatement<EventRow[]>(sql, LOAD_EVENTS_OF_ORGANIZATION, [messageId, organizationId]);
  return rows.map((row) => ({ seq: row.seq, event: toEvent(row) }));
}

/** A message's events; exported for the test of its plan (one partition's primary key, docs/decisions/0042). */
export const LOAD_EVENTS = `select ${EVENT_SELECT} from message_events e where e.message_id = $1 order by e.seq`;
const LOAD_EVENTS_OF_ORGANIZATION = `select ${EVENT_SELECT} from message_events e
  where e.message_id = $1 and e.organization_id = $2 order by e.seq`;

export async function loadMessage(sql: SqlClient, messageId: string): Promise<MessageState> {
  return fold((await loadEvents(sql, messageId)).map((stored) => stored.event));
}

/** An event as the append writes it. */
export interface EventInsert {
  message_id: string;
  organization_id: string;
  seq: number;
  type: MessageEvent["type"];
  retry_count: number;
  data: unknown;
  occurred_at: string;
  /**
   * Base64 (these rows travel as JSON; {@link insertEventsFrom} decodes it): two thirds of the hex
   * of bytea's text input, through JSON, the socket and Postgres's parser.
   */
  content_enc: string | null;
  recipient_keys: string[] | null;
}

/**
 * The rows that append `events` to a message whose last stored event is `expectedVersion` (0 for
 * a message not stored yet), added to `into`: the one place a sequence number is given.
 */
export function eventRows(
  message: { id: string; organizationId: string },
  expectedVersion: number,
  events: readonly MessageEvent[],
  into: EventInsert[] = [],
): EventInsert[] {
  events.forEach((event, index) => {
    // An accepted content the store sealed is written sealed: its clear fields in `data`.
    const stored = event.type === "accepted" ? storedContentOf(event.data) : undefined;
    into.push({
      message_id: message.id,
      organization_id: message.organizationId,
      seq: expectedVersion + index + 1,
      type: event.type,
      retry_count: event.retryCount,
      data: stored ? stored.clear : event.data,
      occurred_at: event.occurredAt,
      content_enc: stored?.sealed ? stored.sealed.toString("base64") : null,
      recipient_keys: stored ? stored.recipientKeys : null,
    });
  });
  return into;
}

/**
 * Columns of an {@link EventInsert}: the append's input, as a `json_to_recordset` definition
 * (`content_enc` is the base64 text {@link insertEventsFrom} decodes).
 */
export const EVENT_INPUT = `message_id uuid, organization_id uuid, seq integer, type text, retry_count integer,
  data jsonb, occurred_at timestamptz, content_enc text, recipient_keys text[]`;
const EVENT_NAMES =
  "message_id, organization_id, seq, type, retry_count, data, occurred_at, content_enc, recipient_keys";
const EVENT_VALUES =
  "message_id, organization_id, seq, type, retry_count, data, occurred_at, decode(content_enc, 'base64'), recipient_keys";

/**
 * The append: the INSERT of the rows of `source`, a relation whose rows are {@link EventInsert}s
 * ({@link EVENT_INPUT}), as a part of a larger statement. A sequence number already taken
 * (`unique(message_id, seq)`) fails the whole statement: another writer appended first.
 */
export function insertEventsFrom(source: string): string {
  return `insert into message_events (${EVENT_NAMES}) select ${EVENT_VALUES} from ${source}`;
}

/**
 * The events of `$1` and the records they fold to of `$2` (JSON text), in one statement: the
 * events' INSERT runs though nothing reads it, and a unique violation fails the whole statement.
 */
const APPEND = `with appended as (${insertEventsFrom(`json_to_recordset($1::json) as e(${EVENT_INPUT})`)})
  ${insertRecordsFrom(recordsInput("$2"))}
  ${REPLACE_OLDER_RECORD}`;

/**
 * {@link APPEND} that also adds the suppression list's entries of `$3` (JSON text of
 * {@link SUPPRESSION_INPUT} rows): a receipt's event and the entry it calls for commit together
 * or not at all (docs/decisions/0039), whether or not a transaction is open.
 */
const APPEND_SUPPRESSING = `with appended as (${insertEventsFrom(`json_to_recordset($1::json) as e(${EVENT_INPUT})`)}),
  suppressed as (${insertSuppressionsFrom(`json_to_recordset($3::json) as s(${SUPPRESSION_INPUT})`)})
  ${insertRecordsFrom(recordsInput("$2"))}
  ${REPLACE_OLDER_RECORD}`;

/**
 * {@link APPEND} that hands off (docs/decisions/0036, "The handoff"): it writes its events' webhook
 * deliveries itself, those of the endpoints of final events only born leased to the caller for
 * `$3` ms, and returns those with their endpoints' columns ({@link insertDeliveriesHandingOff},
 * {@link selectHandedDeliveries}). `notify.webhook_fan_out_written`, set inside it, has the fan-out
 * trigger write nothing for it (and clear the setting: db/migrations/0025_webhook-handoff-returned.sql).
 */
const APPEND_HANDING_OFF = `with appended as (${insertEventsFrom(
  `json_to_recordset($1::json) as e(${EVENT_INPUT})
    cross join (select set_config('notify.webhook_fan_out_written', 'on', true)) written`,
)} returning organization_id, message_id, seq, type, data, occurred_at, position),
  delivered as (${insertDeliveriesHandingOff("appended", "$3")}),
  recorded as (${insertRecordsFrom(recordsInput("$2"))} ${REPLACE_OLDER_RECORD})
  ${selectHandedDeliveries("delivered")}`;

/** One message's append: the events after `state`, and the record they fold to. */
interface Append {
  state: MessageState;
  events: readonly MessageEvent[];
}

/**
 * Appends events after `state` (optimistic concurrency on `(message_id, seq)`) and updates the
 * projection, in one statement: atomic on its own, so the record is never behind its events,
 * and it may run inside a transaction or outside one (one round trip, one commit). With
 * `suppress`, the same statement adds those entries to the suppression list (an entry already
 * there is kept): a receipt is never recorded without the entry it calls for, nor the entry
 * without it. Returns the new state.
 */
export async function appendEvents(
  sql: SqlClient,
  state: MessageState,
  events: readonly MessageEvent[],
  suppress: readonly NewSuppression[] = [],
): Promise<MessageState> {
  if (events.length === 0) {
    // Never the entry without the receipt that calls for it.
    if (suppress.length > 0) throw new Error("suppression entries without an event to append");
    return state;
  }
  const [next] = await writeAppends(sql, [{ state, events }], suppress);
  return next as MessageState;
}

/**
 * {@link appendEvents} for many messages in one statement (the worker groups the appends of its
 * concurrent jobs). Any conflict fails the whole statement: with one message that is its
 * {@link ConcurrencyError}; callers with several retry them one by one to find out which.
 */
export async function writeAppends(
  sql: SqlClient,
  appends: readonly Append[],
  suppress: readonly NewSuppression[] = [],
): Promise<MessageState[]> {
  const { rows, records, states } = appendInput(appends);
  await failingAsConcurrency(
    states,
    suppress.length === 0
      ? runStatement(sql, APPEND, [JSON.stringify(rows), JSON.stringify(records)])
      : runStatement(sql, APPEND_SUPPRESSING, [
          JSON.stringify(rows),
          JSON.stringify(records),
          JSON.stringify(suppressionRows(suppress)),
        ]),
  );
  return states;
}

/**
 * {@link writeAppends} that hands off ({@link APPEND_HANDING_OFF}): it also returns the webhook
 * deliveries it wrote leased to the caller for `leaseMs`, to POST once it has returned (committed).
 */
export async function writeAppendsHandingOff(
  sql: SqlClient,
  appends: readonly Append[],
  leaseMs: number,
): Promise<{ states: MessageState[]; handed: HandedRow[] }> {
  const { rows, records, states } = appendInput(appends);
  const handed = await failingAsConcurrency(
    states,
    runStatement<HandedRow[]>(sql, APPEND_HANDING_OFF, [
      JSON.stringify(rows),
      JSON.stringify(records),
      String(Math.round(leaseMs)),
    ]),
  );
  return { states, handed };
}

/** The appends' event rows, their records, and the states they fold to. */
function appendInput(appends: readonly Append[]) {
  const rows: EventInsert[] = [];
  const records: RecordColumns[] = [];
  const states = appends.map(({ state, events }) => {
    const next = fold(events, state);
    if (next.status === "initial") throw new Error("unreachable: events fold to a known message");
    eventRows(next.message, state.version, events, rows);
    // A message's first append makes its record; later ones never change its content columns.
    records.push(recordColumns(toMessageRow(next), state.version === 0));
    return next;
  });
  return { rows, records, states };
}

/** `written`, its unique violation a {@link ConcurrencyError} when it appends to one message. */
async function failingAsConcurrency<T>(
  states: ReadonlyArray<{ message: { id: string } }>,
  written: Promise<T>,
): Promise<T> {
  try {
    return await written;
  } catch (error) {
    const [only] = states;
    if (only && states.length === 1 && isUniqueViolation(error)) throw new ConcurrencyError(only.message.id);
    throw error;
  }
}
