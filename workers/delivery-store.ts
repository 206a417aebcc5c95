import type { SqlClient } from "../db/client.js";
import { isDatabaseUnavailable, isUndefinedTable } from "../db/errors.js";
import type { MessageEvent } from "../src/domain/events.js";
import { fold, type MessageState } from "../src/domain/state.js";
import type { SuppressionEntry, SuppressionFact } from "../src/domain/suppression.js";
import { UnreadableContentError } from "../src/runtime/content-crypto.js";
import type { Logger } from "../src/runtime/logger.js";
import type { ContentVault, Opener } from "../src/store/content.js";
import { createDayTables, dayTable, onDayTables, oneDayOf } from "../src/store/day-partitions.js";
import {
  EVENT_SELECT_WITHOUT_INDEXES,
  type EventRow,
  toEvent,
  writeAppends,
  writeAppendsHandingOff,
} from "../src/store/events.js";
import { microBatch } from "../src/store/micro-batch.js";
import { runStatement } from "../src/store/statement.js";
import { type HandedDelivery, type HandedRow, handedDelivery } from "../src/store/webhook-deliveries.js";
import type { WebhookHandoff } from "./webhook-dispatcher.js";

/** How long a day's table found not ready is not asked about again (tests and the benchmark wait on it). */
export { PARTITION_READY_RECHECK_MS } from "../src/store/day-partitions.js";

/** A message as the delivery worker loads it. */
export interface DeliveryLoad {
  state: MessageState;
  /** The message's organization exists and is active (the pre-send check). */
  organizationActive: boolean;
  /** The suppression list's entries for its recipients, when it has any (docs/decisions/0039). */
  suppression?: LoadedSuppression;
}

/** What the list says of a message's recipients, and which of them (an e-mail's) to leave out. */
export interface LoadedSuppression extends SuppressionFact {
  /** Whether this recipient (as the content names it) is one of the suppressed ones. */
  isSuppressed(recipient: string): boolean;
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
  /** The vault the loads open contents with (the suppression list seals recipients with it too). */
  readonly content: ContentVault;
}

const MAX_BATCH = 100;
// Two: one statement filling while the other runs. More in flight cost more worker CPU per
// message for no more throughput; one alone made the slowest deliveries wait for a whole batch.
const MAX_IN_FLIGHT = 2;

/**
 * The worker process makes one, at start-up: its batches are shared by every job. `logger` is
 * told of each message whose content does not open. With `webhooks` (the process's webhook
 * dispatcher), each append has its webhook deliveries born leased to this process and hands its
 * events to the dispatcher once it has committed (docs/decisions/0036, "The handoff").
 */
export function createDeliveryStore(
  sql: SqlClient,
  content: ContentVault,
  logger?: Pick<Logger, "warn">,
  webhooks?: WebhookHandoff,
): DeliveryStore {
  const options = { maxBatch: MAX_BATCH, maxInFlight: MAX_IN_FLIGHT };
  const rowsOf = rowsFromPartitions(sql);
  const load = microBatch((ids: string[]) => loadMany(rowsOf, sql, content, ids, logger), {
    ...options,
    retryOneByOne: () => false,
  });
  // A conflict fails the batch; one by one, only the conflicting message gets its ConcurrencyError.
  const append = microBatch(
    async (appends: Array<{ state: MessageState; events: readonly MessageEvent[] }>) => {
      if (!webhooks) return writeAppends(sql, appends);
      const { states, handed } = await writeAppendsHandingOff(sql, appends, webhooks.leaseMs);
      // Committed: nothing here may fail the batch (its retry one by one would append again).
      try {
        if (handed.length > 0) webhooks.handOff(handedDeliveries(appends, states, handed));
      } catch (error) {
        logger?.warn(
          { err: error },
          "handing appended events to the webhook dispatcher failed; their leases run out",
        );
      }
      return states;
    },
    { ...options, retryOneByOne: (error) => !isDatabaseUnavailable(error) },
  );
  return {
    load,
    content,
    append: async (state, events) => (events.length === 0 ? state : append({ state, events })),
  };
}

/**
 * The deliveries a committed append handed off (`handed`, its rows), each with its event and
 * message from the appends themselves: what the POSTs' bodies need.
 */
function handedDeliveries(
  appends: ReadonlyArray<{ state: MessageState; events: readonly MessageEvent[] }>,
  states: readonly MessageState[],
  handed: readonly HandedRow[],
): HandedDelivery[] {
  const byMessage = new Map<string, number>();
  states.forEach((next, i) => {
    if (next.status !== "initial") byMessage.set(next.message.id, i);
  });
  return handed.flatMap((row) => {
    const i = byMessage.get(row.message_id);
    const append = i === undefined ? undefined : appends[i];
    const next = i === undefined ? undefined : states[i];
    const event = append?.events[row.seq - append.state.version - 1];
    if (!append || !event || !next || next.status === "initial") return []; // unreachable: its lease runs out
    const { id, organizationId, channel, priority, notificationType } = next.message;
    const message = { messageId: id, organizationId, channel, priority, notificationType };
    return [handedDelivery(row, { message, event: { ...event, seq: row.seq } })];
  });
}

/**
 * The events of the messages `$1` (without the blind indexes: a delivery's appends never write the
 * record's content columns), and on each `accepted` event, the first of its message, whether the
 * organization is active and whether one of its recipients' blind indexes is on the
 * organization's suppression list for its channel. The batch's check of the list is this same
 * statement, no round trip of its own; only a batch with a suppressed message reads the entries
 * ({@link SUPPRESSION_ENTRIES}). The first recipient (most messages' only one) is one probe of
 * the list's unique key, each of its three columns equal. Asked as `= any(recipient_keys)` alone,
 * Postgres, counting ten elements in an array it cannot see, read the organization's whole list
 * for the channel instead and filtered it (334 entries a message with the benchmark's 100,000 over
 * 100 organizations; a load of 30: 1,690 µs against 621 µs, `bench/micro/load-statement.ts`). A
 * message's other recipients are looked for that way still: where the organization's list is
 * long, the planner probes for each. (`offset 0` keeps the first `exists` a probe per message:
 * when every condition on the outer row is a plain equality, Postgres may instead hash the whole
 * `suppressions` table once per load, which a plan made while the table was small and kept as it
 * grew did at every load. The second's `= any` cannot be hashed.) The organization is a subquery
 * rather than a join (planning the join cost about 60 µs a load more), the check an `exists`
 * rather than the entries themselves (an aggregate cost about 70 µs of planning, `exists` about
 * 35: bench/micro/suppression-check.ts).
 */
export const LOAD_FOR_DELIVERY = `select ${EVENT_SELECT_WITHOUT_INDEXES},
    case when e.seq = 1 then (select o.active from organizations o where o.id = e.organization_id)
    end as organization_active,
    case when e.seq = 1 and e.recipient_keys is not null then exists (
        select from suppressions s
        where s.organization_id = e.organization_id and s.channel = e.data->>'channel'
          and s.recipient_key = e.recipient_keys[1]
        offset 0)
      or cardinality(e.recipient_keys) > 1 and exists (
        select from suppressions s
        where s.organization_id = e.organization_id and s.channel = e.data->>'channel'
          and s.recipient_key = any(e.recipient_keys[2:]))
    end as suppressed
  from message_events e
  where e.message_id = any($1::uuid[])
  order by e.message_id, e.seq`;

/**
 * The rows of {@link LOAD_FOR_DELIVERY} for `ids`, read from their day's table by name when they
 * are all UUIDv7s of one UTC day (nearly always) and the table is ready
 * (src/store/day-partitions.ts). The statement on the parent is planned at every execution, its
 * array of ids pruning the day partitions while planning, a hundred of them with a 90-day
 * retention; on the partition there is nothing to prune. Ids of several days, of a day whose
 * table is not ready (still young, or not made: the ids are in the default partition, or past
 * retention), of no day or of another UUID version read the parent.
 */
export function rowsFromPartitions(
  sql: SqlClient,
  now: () => number = Date.now,
): (ids: string[]) => Promise<LoadRow[]> {
  const dayTables = createDayTables(sql, now);
  return async (ids) => {
    const day = oneDayOf(ids);
    const tables = day === undefined ? undefined : [dayTable("message_events", day)];
    if (tables && (await dayTables.ready(tables))) {
      try {
        return await runStatement<LoadRow[]>(sql, onDayTables(LOAD_FOR_DELIVERY, day as string), [ids]);
      } catch (error) {
        // Dropped since (retention): asked about again at the next load.
        if (!isUndefinedTable(error)) throw error;
        dayTables.forget(tables);
      }
    }
    return runStatement<LoadRow[]>(sql, LOAD_FOR_DELIVERY, [ids]);
  };
}

/** The suppression entries of the messages `$1` (their `accepted` events' recipients), oldest first. */
const SUPPRESSION_ENTRIES = `select e.message_id, s.recipient_key, s.reason,
    to_char(s.created_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') as created_at,
    cardinality(e.recipient_keys) as recipients
  from message_events e
  join suppressions s on s.organization_id = e.organization_id and s.channel = e.data->>'channel'
    and s.recipient_key = any(e.recipient_keys)
  where e.message_id = any($1::uuid[]) and e.seq = 1
  order by e.message_id, s.id`;

interface SuppressedColumn {
  keys: string[];
  entries: SuppressionEntry[];
  recipients: number;
}

export type LoadRow = EventRow & { organization_active: boolean | null; suppressed: boolean | null };

/** The entries of the messages the load flagged, by message. */
async function suppressionEntries(
  sql: SqlClient,
  messageIds: string[],
): Promise<Map<string, SuppressedColumn>> {
  const byMessage = new Map<string, SuppressedColumn>();
  if (messageIds.length === 0) return byMessage;
  const rows = await runStatement<
    Array<{
      message_id: string;
      recipient_key: string;
      reason: SuppressionEntry["reason"];
      created_at: string;
      recipients: number;
    }>
  >(sql, SUPPRESSION_ENTRIES, [messageIds]);
  for (const row of rows) {
    let found = byMessage.get(row.message_id);
    if (!found) {
      found = { keys: [], entries: [], recipients: row.recipients };
      byMessage.set(row.message_id, found);
    }
    found.keys.push(row.recipient_key);
    found.entries.push({ reason: row.reason, createdAt: row.created_at });
  }
  return byMessage;
}

async function loadMany(
  rowsOf: (ids: string[]) => Promise<LoadRow[]>,
  sql: SqlClient,
  content: ContentVault,
  messageIds: string[],
  logger?: Pick<Logger, "warn">,
): Promise<DeliveryLoad[]> {
  // The ids as one array parameter: joined to a JSON set instead, this scanned the whole
  // message_events table for every batch (see src/store/records.ts).
  const rows = await rowsOf(messageIds);
  // The provider needs the content: the keys of the sealed ones are loaded once for the batch.
  const opener = await openerOrNone(content, rows);
  const byMessage = new Map<string, { rows: LoadRow[]; active: boolean }>();
  for (const row of rows) {
    let entry = byMessage.get(row.message_id);
    if (!entry) {
      // The first row of a message is its event 1 (rows come in seq order), which carries the flag.
      entry = { rows: [], active: row.organization_active === true };
      byMessage.set(row.message_id, entry);
    }
    entry.rows.push(row);
  }
  const flagged = rows.filter((row) => row.suppressed === true).map((row) => row.message_id);
  const suppressed = await suppressionEntries(sql, flagged);
  const loads: DeliveryLoad[] = [];
  for (const id of messageIds) {
    const entry = byMessage.get(id);
    const events = entry ? await eventsOf(content, entry.rows, opener, logger) : [];
    const load: DeliveryLoad = { state: fold(events), organizationActive: entry?.active ?? false };
    const found = suppressed.get(id);
    if (found && entry) {
      const sealed = entry.rows[0]?.content_enc ?? null;
      load.suppression = suppressionOf(found, sealed, opener ?? (await openerOrNone(content, entry.rows)));
    }
    loads.push(load);
  }
  return loads;
}

/**
 * The entries found for a message, as the domain's fact; a recipient of its content is matched by
 * its blind index under the content's own key (an e-mail's addresses, when some are suppressed).
 */
function suppressionOf(
  column: SuppressedColumn,
  sealed: Buffer | null,
  opener: Opener | undefined,
): LoadedSuppression {
  const keys = new Set(column.keys);
  return {
    entries: column.entries,
    everyRecipient: keys.size >= column.recipients,
    // A recipient that cannot be matched (its content's key is not there) counts as suppressed:
    // never sent to unchecked. Such a content does not open either, so the message is rejected.
    isSuppressed: (recipient) => {
      const key = opener?.recipientKeyOf(sealed, recipient);
      return key === undefined || keys.has(key);
    },
  };
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
