import type { SqlClient } from "../../db/client.js";
import { isDatabaseUnavailable } from "../../db/errors.js";
import type { MessageEvent } from "../domain/events.js";
import { EVENT_INPUT, type EventInsert, eventRows, insertEventsFrom } from "./events.js";
import { microBatch, type QueueLimits } from "./micro-batch.js";
import type { MessageRow } from "./projection.js";
import { insertRecordsSealedAs, type RecordColumns, recordColumnsBesideEvent } from "./records.js";
import { runStatement } from "./statement.js";

/** How long an `Idempotency-Key` is held; an older one may be claimed again. */
export const IDEMPOTENCY_WINDOW_MS = 24 * 60 * 60 * 1000;

/** One message ready to be committed: its accepted event, its record and its outbox row. */
export interface PendingAccept {
  event: Extract<MessageEvent, { type: "accepted" }>;
  row: MessageRow;
  /** The BullMQ priority of its delivery job. */
  queuePriority: number;
  idempotency?: { key: string; requestHash: string };
}

export type CommitResult =
  | { outcome: "accepted"; messageId: string }
  | { outcome: "replayed"; messageId: string }
  | { outcome: "idempotency_conflict" };

/**
 * A request's answer, or the error it alone gets: a batch committed, yet the read some of its
 * requests need (what their held Idempotency-Key recorded) failed.
 */
type Answer = CommitResult | { outcome: "unanswered"; error: unknown };

interface HeldKey {
  requestHash: string;
  messageId: string;
}

export interface AcceptBatcherOptions extends QueueLimits {
  /** The BullMQ prefix (`QUEUE_PREFIX`) of the queue the outbox rows are for. */
  queuePrefix: string;
  /** How long an `Idempotency-Key` is held; default {@link IDEMPOTENCY_WINDOW_MS}. */
  idempotencyWindowMs?: number;
  /** Most messages in one statement. */
  maxBatch?: number;
  /** Most statements in flight at once; further requests wait and join the next batch. */
  maxInFlight?: number;
}

const DEFAULT_MAX_BATCH = 200;
/** One statement at a time: whatever arrives meanwhile forms the next, larger batch. */
const DEFAULT_MAX_IN_FLIGHT = 1;

/**
 * One batch of accepts: `$1` the events with what the statement needs besides (JSON text), `$2`
 * how long a key is held (ms), `$3` the records without their sealed content, which they take
 * from their event's row (JSON text), `$4` the queue prefix. Claims the
 * idempotency keys, then appends the accepted messages' events through the event store's insert,
 * their records through the records' insert, and their outbox rows; returns the accepted ids.
 */
const ACCEPT = `
  with input as (
    select * from json_to_recordset($1::json) as t(${EVENT_INPUT},
      queue_priority smallint, idempotency_key text, request_hash text, ord integer)
  ),
  claimed as (
    insert into idempotency_keys as k (organization_id, key, request_hash, message_id, created_at)
    select organization_id, idempotency_key, request_hash, message_id, occurred_at
    from input where idempotency_key is not null order by ord
    on conflict (organization_id, key) do update
      set request_hash = excluded.request_hash, message_id = excluded.message_id,
          created_at = excluded.created_at
      -- An expired key may be reused; a live one is answered from what it recorded.
      where k.created_at < excluded.created_at - $2::integer * interval '1 millisecond'
    returning k.message_id
  ),
  accepted as (
    select * from input
    where idempotency_key is null or message_id in (select message_id from claimed)
  ),
  events as (${insertEventsFrom("accepted")}),
  records as (${insertRecordsSealedAs("$3", "accepted")}),
  outbox as (
    insert into delivery_outbox (message_id, queue_prefix, priority)
    select message_id, $4, queue_priority from accepted
  )
  select message_id from accepted`;

/**
 * Groups concurrent accepts into one statement: every request that arrives while the event loop
 * is busy (or while `maxInFlight` statements are running) joins the next batch, whose events,
 * records, outbox rows and idempotency claims are written by one INSERT each, inside a single
 * autocommit statement. Each request is answered once that statement has committed, so a 202
 * still means "committed" (one WAL flush is shared by the whole batch). A batch whose statement
 * fails for a reason other than an unavailable database is retried one request at a time, so one
 * bad row fails alone. Once the statement has committed, nothing fails the batch as a whole: a
 * request whose held key could not be read back fails alone, and no committed one is run again.
 */
export class AcceptBatcher {
  readonly #sql: SqlClient;
  readonly #queuePrefix: string;
  readonly #windowMs: number;
  readonly #commit: (item: PendingAccept) => Promise<Answer>;

  constructor(sql: SqlClient, options: AcceptBatcherOptions) {
    this.#sql = sql;
    this.#queuePrefix = options.queuePrefix;
    this.#windowMs = options.idempotencyWindowMs ?? IDEMPOTENCY_WINDOW_MS;
    this.#commit = microBatch((items: PendingAccept[]) => this.#write(items), {
      maxBatch: options.maxBatch ?? DEFAULT_MAX_BATCH,
      maxInFlight: options.maxInFlight ?? DEFAULT_MAX_IN_FLIGHT,
      retryOneByOne: (error) => !isDatabaseUnavailable(error),
      maxWaiting: options.maxWaiting,
      maxWaitMs: options.maxWaitMs,
    });
  }

  /** Resolves once the message is committed (or the idempotency key answered for it). */
  async commit(item: PendingAccept): Promise<CommitResult> {
    const answer = await this.#commit(item);
    if (answer.outcome === "unanswered") throw answer.error;
    return answer;
  }

  /**
   * Writes a batch in one statement; returns each item's answer, in order. Throws only when that
   * statement fails, so a batch that throws wrote nothing (unless the connection died after the
   * commit, before its answer arrived: a 503 for committed messages, as for any lost reply).
   */
  async #write(items: PendingAccept[]): Promise<Answer[]> {
    // Two requests of one batch with the same key: the first claims it, the others are answered
    // from the first's result, exactly as if they had come one after the other.
    const leaders = new Map<string, number>();
    const followers: Array<[index: number, leader: number]> = [];
    items.forEach((item, index) => {
      if (!item.idempotency) return;
      const id = claimId(item);
      const leader = leaders.get(id);
      if (leader === undefined) leaders.set(id, index);
      else followers.push([index, leader]);
    });
    const followerSet = new Set(followers.map(([index]) => index));
    // Claims in a fixed order, so two concurrent batches never wait on each other's keys in a cycle.
    const written = items
      .map((item, index) => ({ item, index }))
      .filter(({ index }) => !followerSet.has(index))
      .sort((a, b) => compareClaims(a.item, b.item));

    // The event goes in through the event store's append (the message's first: expected version
    // 0) and the record through the records' insert, for the messages accepted; the input is the
    // events with what the statement needs besides.
    const events: EventInsert[] = [];
    const input: Array<ReturnType<typeof acceptInput>> = [];
    const records: RecordColumns[] = [];
    written.forEach(({ item }, ord) => {
      eventRows({ id: item.row.messageId, organizationId: item.row.organizationId }, 0, [item.event], events);
      input.push(acceptInput(item, ord, events[ord] as EventInsert));
      records.push(recordColumnsBesideEvent(item.row));
    });
    const accepted = await runStatement<Array<{ message_id: string }>>(this.#sql, ACCEPT, [
      JSON.stringify(input),
      this.#windowMs,
      JSON.stringify(records),
      this.#queuePrefix,
    ]);
    const acceptedIds = new Set(accepted.map((r) => r.message_id));

    // Committed. From here nothing may fail the batch: its committed requests would be told
    // "failed", or run again one by one into unique violations (a 500 for a stored message).
    const results: Answer[] = new Array(items.length);
    const unclaimed: PendingAccept[] = [];
    for (const { item, index } of written) {
      if (acceptedIds.has(item.row.messageId))
        results[index] = { outcome: "accepted", messageId: item.row.messageId };
      else unclaimed.push(item);
    }
    // If this read fails, only the requests that needed it fail (nothing of theirs was written):
    // a retry with the same key gets their answer.
    const held = await this.#heldKeys(unclaimed).catch((error: unknown) => ({ unreadable: error }));
    const answerHeld = (item: PendingAccept): Answer =>
      held instanceof Map
        ? answerFrom(held.get(claimId(item)), item)
        : { outcome: "unanswered", error: held.unreadable };
    for (const { item, index } of written) {
      if (!results[index]) results[index] = answerHeld(item);
    }
    for (const [index, leader] of followers) {
      const first = items[leader] as PendingAccept;
      const firstResult = results[leader];
      const follower = items[index] as PendingAccept;
      // A follower shares its leader's key: answered from the leader's new message, or from the holder.
      results[index] =
        firstResult?.outcome === "accepted"
          ? answerFrom(
              { requestHash: first.idempotency?.requestHash ?? "", messageId: firstResult.messageId },
              follower,
            )
          : answerHeld(follower);
    }
    return results;
  }

  /** What live keys the batch could not claim recorded (read after the claim, so committed). */
  async #heldKeys(items: PendingAccept[]): Promise<Map<string, HeldKey>> {
    const held = new Map<string, HeldKey>();
    if (items.length === 0) return held;
    // Arrays, not a JSON set to join: Postgres costs a join to a JSON set at 100 rows and may scan
    // the whole table for it (see records.ts). Pairs that were not asked for are simply not looked up.
    const rows = await this.#sql<
      Array<{ organization_id: string; key: string; request_hash: string; message_id: string }>
    >`
      select k.organization_id, k.key, k.request_hash, k.message_id
      from idempotency_keys k
      where k.organization_id = any(${items.map((item) => item.row.organizationId)}::uuid[])
        and k.key = any(${items.map((item) => item.idempotency?.key ?? "")}::text[])`;
    for (const row of rows) {
      held.set(`${row.organization_id}\u0000${row.key}`, {
        requestHash: row.request_hash,
        messageId: row.message_id,
      });
    }
    return held;
  }
}

function claimId(item: PendingAccept): string {
  return `${item.row.organizationId}\u0000${item.idempotency?.key ?? ""}`;
}

function compareClaims(a: PendingAccept, b: PendingAccept): number {
  if (!a.idempotency || !b.idempotency) return a.idempotency ? -1 : b.idempotency ? 1 : 0;
  const x = claimId(a);
  const y = claimId(b);
  return x < y ? -1 : x > y ? 1 : 0;
}

function answerFrom(holder: HeldKey | undefined, item: PendingAccept): Answer {
  if (!holder) return { outcome: "unanswered", error: new Error("idempotency key vanished while held") };
  return holder.requestHash === item.idempotency?.requestHash
    ? { outcome: "replayed", messageId: holder.messageId }
    : { outcome: "idempotency_conflict" };
}

/** A request's event row, with what the batch statement needs besides (last: a spread followed by more properties is slow to build). */
function acceptInput(item: PendingAccept, ord: number, event: EventInsert) {
  return {
    queue_priority: item.queuePriority,
    idempotency_key: item.idempotency?.key ?? null,
    request_hash: item.idempotency?.requestHash ?? null,
    ord,
    ...event,
  };
}
