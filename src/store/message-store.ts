import type postgres from "postgres";
import { isDatabaseUnavailable, postgresError } from "../../db/errors.js";
import type { MessageEvent } from "../domain/events.js";
import { fold, type MessageState } from "../domain/state.js";
import { AcceptBatcher, type CommitResult, type PendingAccept, type SealedAccept } from "./accept-batcher.js";
import type { ContentVault, SealedContent, StoredContent } from "./content.js";
import { eraseOrganizationContent, eraseRecipientContent } from "./erasure.js";
import { appendEvents, loadEvents, type StoredEvent } from "./events.js";
import { holdsIdempotencyKey } from "./idempotency.js";
import type { QueueLimits } from "./micro-batch.js";
import type { MessageRow } from "./projection.js";
import { createRecordFinder } from "./records.js";
import type { NewSuppression } from "./suppressions.js";

/**
 * What the API reads and writes of messages. Concurrent accepts share one statement, and
 * concurrent reads of records one query: the batches belong to this object, so a process makes
 * one (at start-up) and every request shares it.
 */
export interface MessageStore {
  /** Commits an accepted message (its event, record, outbox row and idempotency claim). */
  accept(pending: PendingAccept): Promise<CommitResult>;
  /** A message's record, if it belongs to the organization (another organization's is not found). */
  findRecord(organizationId: string, messageId: string): Promise<MessageRow | undefined>;
  /** A message's events in order; none when the organization has no such message. */
  loadEvents(organizationId: string, messageId: string): Promise<StoredEvent[]>;
  /**
   * A message's state, whatever its organization (a provider's receipt names the message, not
   * the organization), with its events (the receipt's checks look at its `success`).
   */
  loadMessage(messageId: string): Promise<{ state: MessageState; events: StoredEvent[] }>;
  /**
   * `appendEvents`: a `ConcurrencyError` when another writer appended first. With `suppress`, the
   * suppression list's entries are added in the same statement (a receipt's, docs/decisions/0039).
   */
  append(
    state: MessageState,
    events: readonly MessageEvent[],
    suppress?: readonly NewSuppression[],
  ): Promise<MessageState>;
  /** Seals and opens message content (src/store/content.ts): listings open their records with it. */
  content: ContentVault;
  /** Destroys the organization's data keys (src/store/erasure.ts); returns how many. */
  eraseOrganization(organizationId: string): Promise<number>;
  /** Blanks the content of the organization's messages to a recipient; returns their ids. */
  eraseRecipient(organizationId: string, recipient: string): Promise<string[]>;
  /** Whether the organization holds a live `Idempotency-Key` at `at`: a request carrying it is a replay. */
  holdsIdempotencyKey(organizationId: string, key: string, at: Date): Promise<boolean>;
}

export interface MessageStoreOptions {
  sql: postgres.Sql;
  /** The BullMQ prefix (`QUEUE_PREFIX`) of the queue accepted messages go to. */
  queuePrefix: string;
  /**
   * Bound the accepts and reads waiting while a statement runs: while one stalls, one more
   * request is refused at once, and one its deadline has answered is dropped from the queue
   * instead of being run later. Without them the queues have no bound.
   */
  limits?: QueueLimits;
  /** Seals each accepted message's content before it is written; opens records for reading. */
  content: ContentVault;
  /**
   * A read replica's client (DATABASE_READ_URL): records and histories are read there first, and
   * from `sql` when it has not the message (yet: it lags) or cannot answer.
   */
  readSql?: postgres.Sql;
  /** Skips the replica for a while once it could not answer (shared with the listings' reads). */
  replicaBreaker?: ReplicaBreaker;
}

/**
 * How many times one accept is sealed again after the batch found its data key destroyed: once
 * is what an erasure in another process costs; more means erasures of the organization keep
 * coming between the key's load and the batch, and the request fails (a 500, nothing written).
 */
const MAX_SEALINGS = 4;

export function createMessageStore(options: MessageStoreOptions): MessageStore {
  const { sql, limits, content } = options;
  const readSql = options.readSql ?? sql;
  const breaker = options.replicaBreaker ?? new ReplicaBreaker();
  const batcher = new AcceptBatcher(sql, { queuePrefix: options.queuePrefix, ...limits });
  return {
    async accept(pending) {
      for (let sealing = 1; ; sealing++) {
        const sealed = sealedAccept(content, pending);
        const result = await batcher.commit(sealed instanceof Promise ? await sealed : sealed);
        if (result.outcome !== "data_key_destroyed") return result;
        // Another process erased the organization's data after this one cached its key: nothing
        // was written; sealed again under a live key (loaded, or made), the request never knows.
        content.keys.forgetDestroyed(result.dataKeyId);
        if (sealing >= MAX_SEALINGS) {
          throw new Error(
            `the organization's data key was destroyed ${sealing} times while a message was sealed`,
          );
        }
      }
    },
    findRecord: orFromPrimary(
      options.readSql && createRecordFinder(options.readSql, content, limits),
      createRecordFinder(sql, content, limits),
      (record) => record !== undefined,
      breaker,
    ),
    // The history shows no content: its events are read without opening it.
    loadEvents: orFromPrimary(
      options.readSql && ((organizationId, messageId) => loadEvents(readSql, messageId, organizationId)),
      (organizationId, messageId) => loadEvents(sql, messageId, organizationId),
      (events) => events.length > 0,
      breaker,
    ),
    async loadMessage(messageId) {
      const events = await loadEvents(sql, messageId);
      return { state: fold(events.map((stored) => stored.event)), events };
    },
    append: (state, events, suppress) => appendEvents(sql, state, events, suppress),
    content,
    eraseOrganization: (organizationId) => eraseOrganizationContent(sql, content, organizationId),
    eraseRecipient: (organizationId, recipient) =>
      eraseRecipientContent(sql, content, organizationId, recipient),
    holdsIdempotencyKey: (organizationId, key, at) => holdsIdempotencyKey(sql, organizationId, key, at),
  };
}

const SERIALIZATION_FAILURE = "40001";

/** How long reads skip a replica that could not answer before one tries it again. */
export const REPLICA_BREAK_MS = 10_000;

/**
 * A short circuit breaker for the read replica: once a read found it unavailable (down,
 * refusing, or a connect timeout: a replica whose host drops packets costs each read the 1.5 s
 * connect timeout), reads go straight to the primary for {@link REPLICA_BREAK_MS}; then the next
 * read tries the replica again. One per API process, shared by its reads.
 */
export class ReplicaBreaker {
  private openUntil = 0;

  constructor(
    private readonly breakMs = REPLICA_BREAK_MS,
    private readonly now: () => number = Date.now,
  ) {}

  /** Whether reads skip the replica now. */
  get open(): boolean {
    return this.now() < this.openUntil;
  }

  /** The replica could not answer: skip it for a while. */
  trip(): void {
    this.openUntil = this.now() + this.breakMs;
  }
}

/**
 * A read from the replica (when there is one), made again on the primary when the replica's
 * answer is not `found` (it may not have the message yet: it lags) or the replica cannot answer
 * now (down, restarting, cancelling it: {@link isDatabaseUnavailable}, or a conflict with recovery). So a message the API
 * accepted is never a 404 because of the replica; an unknown one costs a read on each. With a
 * `breaker`, a replica found unavailable is skipped for a while (reads go to the primary at once).
 */
export function orFromPrimary<A extends unknown[], R>(
  replica: ((...args: A) => Promise<R>) | undefined,
  primary: (...args: A) => Promise<R>,
  found: (result: R) => boolean,
  breaker?: ReplicaBreaker,
): (...args: A) => Promise<R> {
  if (!replica) return primary;
  return async (...args) => {
    if (breaker?.open) return primary(...args);
    try {
      const result = await replica(...args);
      if (found(result)) return result;
    } catch (error) {
      if (isDatabaseUnavailable(error)) breaker?.trip();
      // A standby also cancels a read that conflicts with the changes it replays (40001).
      else if (postgresError(error)?.code !== SERIALIZATION_FAILURE) throw error;
    }
    return primary(...args);
  };
}

/**
 * The message sealed under its organization's current data key: from here the event and the
 * record are written with the content sealed. With the key cached, sealed at once (no promise).
 */
function sealedAccept(content: ContentVault, pending: PendingAccept): SealedAccept | Promise<SealedAccept> {
  const sealing = content.seal(pending.event.data);
  return sealing instanceof Promise
    ? sealing.then((sealed) => sealedWith(pending, sealed))
    : sealedWith(pending, sealing);
}

function sealedWith(pending: PendingAccept, sealed: SealedContent): SealedAccept {
  const { idempotency } = pending;
  return {
    event: pending.event,
    row: withSealedContent(pending.row, sealed),
    queuePriority: pending.queuePriority,
    // A plain SHA-256 of a short text to a known number can be guessed: stored keyed instead.
    idempotency: idempotency && {
      key: idempotency.key,
      requestHash: sealed.requestKey(idempotency.requestHash),
    },
    dataKeyId: sealed.keyId,
  };
}

/**
 * The record of a message just sealed: the caller's row (made from the message in clear, for
 * this accept alone) with its content columns as `toMessageRow` gives them for a sealed content,
 * set in place rather than folding and projecting the event a second time (the row keeps its shape).
 */
function withSealedContent(row: MessageRow, sealed: StoredContent): MessageRow {
  row.recipient = null;
  row.body = null;
  row.subject = null;
  row.templateFields = null;
  row.contentEnc = sealed.sealed;
  row.recipientKeys = sealed.recipientKeys;
  return row;
}
