import type { SqlClient } from "../db/client.js";
import { isDatabaseUnavailable } from "../db/errors.js";
import type { MessageEvent } from "../src/domain/events.js";
import { fold, type MessageState } from "../src/domain/state.js";
import { UnreadableContentError } from "../src/runtime/content-crypto.js";
import type { Logger } from "../src/runtime/logger.js";
import type { ContentVault, Opener } from "../src/store/content.js";
import { EVENT_SELECT_WITHOUT_INDEXES, type EventRow, toEvent, writeAppends } from "../src/store/events.js";
import { microBatch } from "../src/store/micro-batch.js";
import { runStatement } from "../src/store/statement.js";

/** A message as the delivery worker loads it. */
export interface DeliveryLoad {
  state: MessageState;
  /** The message's organization exists and is active (the pre-send check). */
  organizationActive: boolean;
}

/**
 * What the delivery worker reads and writes, grouped across its concurrent jobs: the loads of
 * jobs that start together go out as one query, and their appends as one statement (one commit).
 * Each call still behaves exactly like its one-message counterpart in src/store/events.ts.
 */
export interface DeliveryStore {
  /** A message's state and whether its organization is active, in one round trip. */
  load(messageId: string): Promise<DeliveryLoad>;
  /** `appendEvents`, sharing its statement and commit with the appends of other jobs. */
  append(state: MessageState, events: readonly MessageEvent[]): Promise<MessageState>;
}

const MAX_BATCH = 100;
// Two: one statement filling while the other runs. More in flight cost more worker CPU per
// message for no more throughput; one alone made the slowest deliveries wait for a whole batch.
const MAX_IN_FLIGHT = 2;

/**
 * The worker process makes one, at start-up: its batches are shared by every job. `logger` is
 * told of each message whose content does not open.
 */
export function createDeliveryStore(
  sql: SqlClient,
  content: ContentVault,
  logger?: Pick<Logger, "warn">,
): DeliveryStore {
  const options = { maxBatch: MAX_BATCH, maxInFlight: MAX_IN_FLIGHT };
  const load = microBatch((ids: string[]) => loadMany(sql, content, ids, logger), {
    ...options,
    retryOneByOne: () => false,
  });
  // A conflict fails the batch; one by one, only the conflicting message gets its ConcurrencyError.
  const append = microBatch(
    (appends: Array<{ state: MessageState; events: readonly MessageEvent[] }>) => writeAppends(sql, appends),
    { ...options, retryOneByOne: (error) => !isDatabaseUnavailable(error) },
  );
  return {
    load,
    append: async (state, events) => (events.length === 0 ? state : append({ state, events })),
  };
}

/**
 * The events of the messages `$1`, each with its organization's active flag (without the blind
 * indexes: a delivery's appends never write the record's content columns).
 */
const LOAD_FOR_DELIVERY = `select ${EVENT_SELECT_WITHOUT_INDEXES}, o.active as organization_active
  from message_events e left join organizations o on o.id = e.organization_id
  where e.message_id = any($1::uuid[])
  order by e.message_id, e.seq`;

async function loadMany(
  sql: SqlClient,
  content: ContentVault,
  messageIds: string[],
  logger?: Pick<Logger, "warn">,
): Promise<DeliveryLoad[]> {
  // The ids as one array parameter: joined to a JSON set instead, this scanned the whole
  // message_events table for every batch (see src/store/records.ts).
  const rows = await runStatement<Array<EventRow & { organization_active: boolean | null }>>(
    sql,
    LOAD_FOR_DELIVERY,
    [messageIds],
  );
  // The provider needs the content: the keys of the sealed ones are loaded once for the batch.
  const opener = await openerOrNone(content, rows);
  const byMessage = new Map<string, { rows: EventRow[]; active: boolean }>();
  for (const row of rows) {
    let entry = byMessage.get(row.message_id);
    if (!entry) {
      entry = { rows: [], active: row.organization_active === true };
      byMessage.set(row.message_id, entry);
    }
    entry.rows.push(row);
  }
  const loads: DeliveryLoad[] = [];
  for (const id of messageIds) {
    const entry = byMessage.get(id);
    const events = entry ? await eventsOf(content, entry.rows, opener, logger) : [];
    loads.push({ state: fold(events), organizationActive: entry?.active ?? false });
  }
  return loads;
}

/** The opener of these rows' sealed contents; undefined when one of their keys does not unwrap. */
async function openerOrNone(content: ContentVault, rows: readonly EventRow[]): Promise<Opener | undefined> {
  try {
    return await content.opener(rows.map((row) => row.content_enc));
  } catch (error) {
    if (error instanceof UnreadableContentError) return undefined;
    throw error;
  }
}

/**
 * One message's events, its content opened. A content that does not open (altered, moved from
 * another row, its key unwrapped by no master key this process has) is that message's alone: it
 * is read as erased, so the message is rejected `content_erased` (docs/decisions/0034), and the
 * rest of the batch is delivered.
 */
async function eventsOf(
  content: ContentVault,
  rows: readonly EventRow[],
  batchOpener: Opener | undefined,
  logger?: Pick<Logger, "warn">,
): Promise<MessageEvent[]> {
  // When the batch's keys did not all unwrap, each message tries with its own.
  const opener = batchOpener ?? (await openerOrNone(content, rows));
  if (opener) {
    try {
      return rows.map((row) => toEvent(row, opener));
    } catch (error) {
      if (!(error instanceof UnreadableContentError)) throw error;
    }
  }
  logger?.warn(
    { messageId: rows[0]?.message_id },
    "message content does not open (altered, or its key unwraps with no master key here); rejecting it as erased",
  );
  return rows.map((row) => toEvent(row));
}
