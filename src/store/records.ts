import { getTableColumns } from "drizzle-orm";
import type { SqlClient } from "../../db/client.js";
import { messages } from "../../db/schema.js";
import { channelNamed } from "../channels/index.js";
import type { MessageContent } from "../domain/events.js";
import { UnreadableContentError } from "../runtime/content-crypto.js";
import { byteaText, type ContentVault, type Opener } from "./content.js";
import { microBatch, type QueueLimits } from "./micro-batch.js";
import type { MessageRow } from "./projection.js";
import { runStatement } from "./statement.js";

/**
 * The `messages` record in the statements written by hand: every column list of them is made
 * here, once, from the drizzle table, so a column added to the schema reaches each of them.
 */

interface Column {
  /** The SQL name, the key of a {@link recordColumns} object. */
  name: string;
  /** The SQL type, for the definition of a `json_to_recordset`. */
  type: string;
  primaryKey: boolean;
  timestamp: boolean;
}

const COLUMNS: readonly Column[] = Object.values(getTableColumns(messages)).map((column) => ({
  name: column.name,
  type: column.getSQLType(),
  primaryKey: column.primary,
  timestamp: column.getSQLType().startsWith("timestamp"),
}));

/** `message_id, organization_id, …`: the insert's column list, and what it selects from its input. */
const NAMES = COLUMNS.map((column) => column.name).join(", ");
/** `message_id uuid, …`: the records as `json_to_recordset` reads them. */
const DEFINITION = COLUMNS.map((column) => `${column.name} ${column.type}`).join(", ");
/**
 * The content a message was accepted with: written when its record is made, never changed by a
 * later append (whose copy may predate an erasure that blanked them).
 */
const CONTENT_COLUMNS: ReadonlySet<string> = new Set([
  "recipient",
  "body",
  "subject",
  "template_fields",
  "content_enc",
  "recipient_keys",
] satisfies Array<SqlName<keyof MessageRow>>);
/** Every column but the key and the content, from the row the insert proposed. */
const UPDATE = COLUMNS.filter((column) => !column.primaryKey && !CONTENT_COLUMNS.has(column.name))
  .map((column) => `${column.name} = excluded.${column.name}`)
  .join(", ");
/**
 * What a read selects from `messages m`: timestamps as epoch milliseconds, since drizzle turns
 * the driver's date parsing off on the shared client.
 */
const RECORD_SELECT = COLUMNS.map((column) =>
  column.timestamp
    ? `(extract(epoch from m.${column.name}) * 1000)::float8 as ${column.name}`
    : // A read never uses the blind indexes (the erasure queries them in SQL): not sent, not parsed.
      column.name === "recipient_keys"
      ? `null::text[] as ${column.name}`
      : `m.${column.name}`,
).join(", ");

type Columns = typeof messages._.columns;
type SqlName<K extends keyof MessageRow> = Columns[K]["_"]["name"];

/**
 * The records of the ids `$1`, as {@link readRecord} reads them. Exported for the test of its plan:
 * one partition's primary key per id (docs/decisions/0042).
 */
export const FIND_RECORDS = `select ${RECORD_SELECT} from messages m where m.message_id = any($1::uuid[])`;

/** The records of the JSON text `param` (an array of {@link recordColumns}), as a relation `r`. */
export function recordsInput(param: string): string {
  return `json_to_recordset(${param}::json) as r(${DEFINITION})`;
}

/** The INSERT of the records `source` holds (a relation with the columns of {@link recordsInput}). */
export function insertRecordsFrom(source: string): string {
  return `insert into messages as m (${NAMES}) select ${NAMES} from ${source}`;
}

/** The sealed content's columns, which the accept takes from its events' input rather than carry twice. */
const SEALED_COLUMNS: ReadonlySet<string> = new Set(["content_enc", "recipient_keys"] satisfies Array<
  SqlName<keyof MessageRow>
>);

/**
 * The INSERT of the records of the JSON text `param` ({@link recordColumnsBesideEvent}: without
 * their sealed content) whose sealed content is that of the rows of `events` with the same
 * `message_id` (an {@link EventInsert}-shaped relation: `content_enc` in base64): the accept sends
 * the sealed bytes once, for the event and the record. A record without such a row is not inserted.
 */
export function insertRecordsSealedAs(param: string, events: string): string {
  const values = COLUMNS.map((column) =>
    column.name === "content_enc"
      ? "decode(c.content_enc, 'base64')"
      : SEALED_COLUMNS.has(column.name)
        ? `c.${column.name}`
        : `r.${column.name}`,
  ).join(", ");
  return `insert into messages as m (${NAMES}) select ${values}
    from ${recordsInput(param)} join ${events} as c on c.message_id = r.message_id`;
}

/** What turns {@link insertRecordsFrom} into an upsert that replaces only an older version. */
export const REPLACE_OLDER_RECORD = `on conflict (message_id) do update set ${UPDATE}
  where m.version < excluded.version`;

const INSERT_RECORDS = insertRecordsFrom(recordsInput("$1"));

/** A record keyed by column name, what {@link insertRecords} takes: the table's names and types. */
export type RecordColumns = {
  [K in keyof MessageRow as SqlName<K>]: MessageRow[K] extends Buffer | null ? string | null : MessageRow[K];
};

/** A record as the select list reads it: timestamps as epoch milliseconds. */
type ReadColumns = {
  [K in keyof MessageRow as SqlName<K>]: MessageRow[K] extends Buffer | null
    ? MessageRow[K]
    : MessageRow[K] extends Date
      ? number
      : MessageRow[K] extends Date | null
        ? number | null
        : MessageRow[K];
};

// The two mappings are object literals rather than loops over COLUMNS: V8 builds a literal's
// shape once, and they run for every accept, append and read. Their types come from the table,
// so the compiler refuses a mapping that misses a column or names one that is not there.

/**
 * A `messages` row keyed by column name, for the statements that insert JSON (`json_to_recordset`).
 * `withContent: false` leaves the content columns null: for an append to a message whose record
 * exists (the accept wrote it; the rebuild rewrites every record under a lock), whose upsert never
 * changes them ({@link REPLACE_OLDER_RECORD}), so the statement need not carry them.
 */
export function recordColumns(row: MessageRow, withContent = true): RecordColumns {
  return withContent ? withContentColumns(row, true) : withoutContentColumns(row);
}

/**
 * {@link recordColumns} for {@link insertRecordsSealedAs}: every column but the sealed content,
 * which comes from the event's row.
 */
export function recordColumnsBesideEvent(row: MessageRow): RecordColumns {
  return withContentColumns(row, false);
}

function withContentColumns(row: MessageRow, sealed: boolean): RecordColumns {
  return {
    message_id: row.messageId,
    organization_id: row.organizationId,
    product_id: row.productId,
    channel: row.channel,
    status: row.status,
    status_reason: row.statusReason,
    priority: row.priority,
    notification_type: row.notificationType,
    recipient: row.recipient,
    sender: row.sender,
    body: row.body,
    subject: row.subject,
    template_fields: row.templateFields,
    segments: row.segments,
    encoding: row.encoding,
    retry_enabled: row.retryEnabled,
    retry_count: row.retryCount,
    version: row.version,
    next_attempt_at: row.nextAttemptAt,
    delivery_time: row.deliveryTime,
    delivery_state: row.deliveryState,
    delivery_updated_at: row.deliveryUpdatedAt,
    delivery_error_code: row.deliveryErrorCode,
    send_at: row.sendAt,
    created_at: row.createdAt,
    updated_at: row.updatedAt,
    content_enc: sealed ? byteaText(row.contentEnc) : null,
    recipient_keys: sealed ? row.recipientKeys : null,
  };
}

function withoutContentColumns(row: MessageRow): RecordColumns {
  // The same columns, the content ones blanked (assigned after: V8 builds a literal that starts
  // with a spread slowly, bench/micro/object-spread.ts).
  const columns = withContentColumns(row, false);
  columns.recipient = null;
  columns.body = null;
  columns.subject = null;
  columns.template_fields = null;
  return columns;
}

const date = (epochMs: number | null) => (epochMs === null ? null : new Date(epochMs));

/** A row read with the select list above, back to a {@link MessageRow}. */
function readRecord(read: ReadColumns): MessageRow {
  return {
    messageId: read.message_id,
    organizationId: read.organization_id,
    productId: read.product_id,
    channel: read.channel,
    status: read.status,
    statusReason: read.status_reason,
    priority: read.priority,
    notificationType: read.notification_type,
    recipient: read.recipient,
    sender: read.sender,
    body: read.body,
    subject: read.subject,
    templateFields: read.template_fields,
    segments: read.segments,
    encoding: read.encoding,
    retryEnabled: read.retry_enabled,
    retryCount: read.retry_count,
    version: read.version,
    nextAttemptAt: date(read.next_attempt_at),
    deliveryTime: date(read.delivery_time),
    deliveryState: read.delivery_state,
    deliveryUpdatedAt: date(read.delivery_updated_at),
    deliveryErrorCode: read.delivery_error_code,
    sendAt: date(read.send_at),
    createdAt: new Date(read.created_at),
    updatedAt: new Date(read.updated_at),
    contentEnc: read.content_enc,
    recipientKeys: read.recipient_keys,
  };
}

/**
 * Records with their sealed content opened into the content columns. Those stay null where the
 * content was erased (its key destroyed, or its sealed part blanked).
 */
export async function openRecords(rows: MessageRow[], vault: ContentVault): Promise<MessageRow[]> {
  const opener = vault.opener(rows.map((row) => row.contentEnc));
  return openRecordsWith(rows, opener instanceof Promise ? await opener : opener);
}

/** {@link openRecords} with the keys loaded. */
function openRecordsWith(rows: MessageRow[], opener: Opener): MessageRow[] {
  for (const row of rows) {
    if (!row.contentEnc) continue;
    const opened = openOrNothing(opener, row);
    if (!opened) continue;
    const content = Object.assign({ channel: row.channel }, opened) as unknown as MessageContent;
    const columns = channelNamed(row.channel).record(content as never);
    row.recipient = content.recipient;
    row.body = columns.body;
    row.subject = columns.subject;
    row.templateFields = columns.templateFields;
  }
  return rows;
}

/**
 * A record's sealed fields, or nothing: one that does not open (altered, or moved from another
 * row) reads as content gone, like an erased one, and fails no other record of its read.
 */
function openOrNothing(opener: Opener, row: MessageRow): Record<string, unknown> | undefined {
  try {
    return opener.open(row.contentEnc, row.organizationId, row.messageId);
  } catch (error) {
    if (error instanceof UnreadableContentError) return undefined;
    throw error;
  }
}

/** Inserts records (from {@link recordColumns}) in one statement. */
export async function insertRecords(sql: SqlClient, records: readonly RecordColumns[]): Promise<void> {
  await runStatement(sql, INSERT_RECORDS, [JSON.stringify(records)]);
}

/** A message's record, if it belongs to the organization (another organization's is not found, exactly like an unknown one). */
type FindRecord = (organizationId: string, messageId: string) => Promise<MessageRow | undefined>;

interface Key {
  organizationId: string;
  messageId: string;
}

/**
 * {@link FindRecord} where the reads that arrive together share one query; `limits` bound the
 * reads waiting while one runs, as for accepts.
 */
export function createRecordFinder(
  sql: SqlClient,
  vault: ContentVault,
  limits: QueueLimits = {},
): FindRecord {
  const find = microBatch((keys: Key[]) => findMany(sql, vault, keys), {
    maxBatch: 100,
    // One query at a time, as for accepts: reads that arrive meanwhile form the next, larger batch.
    maxInFlight: 1,
    retryOneByOne: () => false,
    ...limits,
  });
  return (organizationId, messageId) => find({ organizationId, messageId });
}

async function findMany(
  sql: SqlClient,
  vault: ContentVault,
  keys: Key[],
): Promise<Array<MessageRow | undefined>> {
  // The ids as one array parameter, not a JSON set to join: Postgres costs a join to a
  // set-returning function at 100 rows and, on tables of moderate size, chose to scan the
  // whole table for every batch (test/integration/store/batch-lookups.test.ts).
  const rows = await runStatement<ReadColumns[]>(sql, FIND_RECORDS, [keys.map((key) => key.messageId)]);
  const byId = new Map(rows.map((row) => [row.message_id, row]));
  const records = keys.map((key) => {
    const row = byId.get(key.messageId);
    // Another organization's message is not found, exactly like an unknown one.
    return row && row.organization_id === key.organizationId ? readRecord(row) : undefined;
  });
  const found = records.filter((record): record is MessageRow => record !== undefined);
  // The keys are cached but for the first read of a key in a while: then opened without a wait.
  const opener = vault.opener(found.map((record) => record.contentEnc));
  openRecordsWith(found, opener instanceof Promise ? await opener : opener);
  return records;
}
