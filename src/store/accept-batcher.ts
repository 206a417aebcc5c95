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
  /**
   * A scheduled send's `send_at` (ISO 8601), when it is still ahead: the message waits in
   * `scheduled_deliveries` until then instead of going to the outbox.
   */
  dueAt?: string;
  idempotency?: { key: string; requestHash: string };
}

export type CommitResult =
  | { outcome: "accepted"; messageId: string }
  | { outcome: "replayed"; messageId: string }
  | { outcome: "idempotency_conflict" };

/** A message sealed for the batch: `dataKeyId` is the data key its content is sealed under. */
export interface SealedAccept extends PendingAccept {
  dataKeyId: string;
}

/**
 * What the batch did with a sealed message: committed it (or answered it from its key), or wrote
 * nothing of it because the data key it was sealed under had been destroyed (an erasure in
 * another process, whose key this process still had cached): to be sealed again under a live key.
 */
export type SealedCommitResult = CommitResult | { outcome: "data_key_destroyed"; dataKeyId: string };

/**
 * A request's answer, or the error it alone gets: a batch committed, yet the read some of its
 * requests need (what their held Idempotency-Key recorded) failed.
 */
type Answer = SealedCommitResult | Unanswered;

/** A request of a committed batch whose held key could not be read back: nothing of it was written. */
export interface Unanswered {
  outcome: "unanswered";
  error: unknown;
}

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
 * from their event's row (JSON text), `$4` the queue prefix, `$5` the data keys the batch's
 * contents are sealed under. Takes only the messages whose data key is still live, then claims
 * their idempotency keys, appends the accepted messages' events through the event store's
 * insert, their records through the records' insert, and their outbox rows (a scheduled send's
 * row in `scheduled_deliveries` instead, docs/decisions/0044); returns the accepted
 * ids (`accepted` true) and those not written because their data key was destroyed (false).
 *
 * The live keys are locked FOR SHARE, in id order (so two batches never wait on each other in a
 * cycle), until the statement commits: an erasure's UPDATE of a key waits for the batches that
 * locked it, so their messages were committed before the erasure and are erased with the rest;
 * a batch that comes to a key an erasure has updated waits for the erasure to commit, then reads
 * the key's new version (READ COMMITTED re-checks a locked row), finds it destroyed, and writes
 * none of its messages. No message is ever committed after an erasure under the key it destroyed
 * (docs/decisions/0034).
 */
const ACCEPT = `
  with input as (
    select * from json_to_recordset($1::json) as t(${EVENT_INPUT},
      queue_priority smallint, due_at timestamptz, idempotency_key text, request_hash text, ord integer,
      data_key_id uuid)
  ),
  live_keys as (
    select id from organization_data_keys
    where id = any($5::uuid[]) and wrapped_key is not null
    order by id
    for share
  ),
  sealed as (
    select * from input where data_key_id in (select id from live_keys)
  ),
  claimed as (
    insert into idempotency_keys as k (organization_id, key, request_hash, message_id, created_at)
    select organization_id, idempotency_key, request_hash, message_id, occurred_at
    from sealed where idempotency_key is not null order by ord
    on conflict (organization_id, key) do update
      set request_hash = excluded.request_hash, message_id = excluded.message_id,
          created_at = excluded.created_at
      -- An expired key may be reused; a live one is answered from what it recorded.
      where k.created_at < excluded.created_at - $2::integer * interval '1 millisecond'
    returning k.message_id
  ),
  accepted as (
    select * from sealed
    where idempotency_key is null or message_id in (select message_id from claimed)
  ),
  events as (${insertEventsFrom("accepted")}),
  records as (${insertRecordsSealedAs("$3", "accepted")}),
  outbox as (
    insert into delivery_outbox (message_id, queue_prefix, priority, organization_id)
    select message_id, $4, queue_priority, organization_id from accepted where due_at is null
  ),
  scheduled as (
    insert into scheduled_deliveries (message_id, queue_prefix, priority, due_at, organization_id)
    select message_id, $4, queue_priority, due_at, organization_id from accepted where due_at is not null
  )
  select message_id, true as accepted from accepted
  union all
  select message_id, false from input where data_key_id not in (select id from live_keys)`;

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
  readonly #commit: (item: SealedAccept) => Promise<Answer>;

  constructor(sql: SqlClient, options: AcceptBatcherOptions) {
    this.#sql = sql;
    this.#queuePrefix = options.queuePrefix;
    this.#windowMs = options.idempotencyWindowMs ?? IDEMPOTENCY_WINDOW_MS;
    this.#commit = microBatch((items: SealedAccept[]) => this.#write(items), {
      maxBatch: options.maxBatch ?? DEFAULT_MAX_BATCH,
      maxInFlight: options.maxInFlight ?? DEFAULT_MAX_IN_FLIGHT,
      retryOneByOne: (error) => !isDatabaseUnavailable(error),
      maxWaiting: options.maxWaiting,
      maxWaitMs: options.maxWaitMs,
    });
  }

  /**
   * Resolves once the message is committed (or the idempotency key answered for it), or once the
   * batch found its data key destroyed (nothing of it written).
   */
  async commit(item: SealedAccept): Promise<SealedCommitResult> {
    const answer = await this.#commit(item);
    if (answer.outcome === "unanswered") throw answer.error;
    return answer;
  }

  /**
   * Commits these items together, in one statement of their own (one transaction), whatever the
   * other accepts are doing: a batch request's messages (`POST …/batch`). One answer per item, in
   * order; `unanswered` for an item whose held key could not be read back. Throws when the
   * statement fails: then nothing of them was written.
   */
  async commitTogether(items: SealedAccept[]): Promise<Answer[]> {
    return this.#write(items);
  }

  /**
   * Writes a batch in one statement; returns each item's answer, in order. Throws only when that
   * statement fails, so a batch that throws wrote nothing (unless the connection died after the
   * commit, before its answer arrived: a 503 for committed messages, as for any lost reply).
   */
  async #write(items: SealedAccept[]): Promise<Answer[]> {
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
    const dataKeyIds = new Set<string>();
    written.forEach(({ item }, ord) => {
      eventRows({ id: item.row.messageId, organizationId: item.row.organizationId }, 0, [item.event], events);
      input.push(acceptInput(item, ord, events[ord] as EventInsert));
      records.push(recordColumnsBesideEvent(item.row));
      dataKeyIds.add(item.dataKeyId);
    });
    const outcomes = await runStatement<Array<{ message_id: string; accepted: boolean }>>(this.#sql, ACCEPT, [
      JSON.stringify(input),
      this.#windowMs,
      JSON.stringify(records),
      this.#queuePrefix,
      [...dataKeyIds],
    ]);
    const acceptedIds = new Set<string>();
    const unsealedIds = new Set<string>();
    for (const row of outcomes) (row.accepted ? acceptedIds : unsealedIds).add(row.message_id);

    // Committed. From here nothing may fail the batch: its committed requests would be told
    // "failed", or run again one by one into unique violations (a 500 for a stored message).
    const results: Answer[] = new Array(items.length);
    const unclaimed: SealedAccept[] = [];
    for (const { item, index } of written) {
      if (acceptedIds.has(item.row.messageId))
        results[index] = { outcome: "accepted", messageId: item.row.messageId };
      else if (unsealedIds.has(item.row.messageId))
        results[index] = { outcome: "data_key_destroyed", dataKeyId: item.dataKeyId };
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
      const first = items[leader] as SealedAccept;
      const firstResult = results[leader];
      const follower = items[index] as SealedAccept;
      // A follower shares its leader's key: answered from the leader's new message, or from the
      // holder; when the leader wrote nothing (its data key destroyed), it is sealed again too.
      results[index] =
        firstResult?.outcome === "data_key_destroyed"
          ? { outcome: "data_key_destroyed", dataKeyId: follower.dataKeyId }
          : firstResult?.outcome === "accepted"
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
function acceptInput(item: SealedAccept, ord: number, event: EventInsert) {
  return {
    queue_priority: item.queuePriority,
    due_at: item.dueAt ?? null,
    idempotency_key: item.idempotency?.key ?? null,
    request_hash: item.idempotency?.requestHash ?? null,
    ord,
    data_key_id: item.dataKeyId,
    ...event,
  };
}
