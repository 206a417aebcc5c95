import type postgres from "postgres";
import type { MessageEvent } from "../domain/events.js";
import { fold, type MessageState } from "../domain/state.js";
import {
  AcceptBatcher,
  type CommitResult,
  type PendingAccept,
  type SealedAccept,
  type Unanswered,
} from "./accept-batcher.js";
import type { ContentVault, SealedContent, StoredContent } from "./content.js";
import { eraseOrganizationContent, eraseRecipientContent } from "./erasure.js";
import { appendEvents, loadEvents, type StoredEvent } from "./events.js";
import { holdsIdempotencyKey } from "./idempotency.js";
import type { QueueLimits } from "./micro-batch.js";
import type { MessageRow } from "./projection.js";
import { orFromPrimary, type ReplicaPause } from "./read-replica.js";
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
  /**
   * Commits these messages together, in one statement (one transaction): a batch request's. One
   * result per message, in order; `unanswered` for one whose held key could not be read back.
   * Throws when the statement fails (nothing written).
   */
  acceptMany(pendings: readonly PendingAccept[]): Promise<Array<CommitResult | Unanswered>>;
  /** A message's record, if it belongs to the organization (another organization's is not found). */
  findRecord(organizationId: string, messageId: string): Promise<MessageRow | undefined>;
  /** {@link findRecord} from the primary alone: a record this request just changed (a replica may lag). */
  findRecordAfterWrite(organizationId: string, messageId: string): Promise<MessageRow | undefined>;
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
   * A read replica (DATABASE_READ_URL): records and histories are read there first, and from
   * `sql` when it has not the message (yet: it lags) or cannot answer (src/store/read-replica.ts).
   */
  replica?: { sql: postgres.Sql; pause: ReplicaPause };
}

/**
 * How many times one accept is sealed again after the batch found its data key destroyed: once
 * is what an erasure in another process costs; more means erasures of the organization keep
 * coming between the key's load and the batch, and the request fails (a 500, nothing written).
 */
const MAX_SEALINGS = 4;

export function createMessageStore(options: MessageStoreOptions): MessageStore {
  const { sql, limits, content, replica } = options;
  const batcher = new AcceptBatcher(sql, { queuePrefix: options.queuePrefix, ...limits });
  const findOnPrimary = createRecordFinder(sql, content, limits);
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
    async acceptMany(pendings) {
      const results = new Array<CommitResult | Unanswered>(pendings.length);
      let waiting = pendings.map((pending, index) => ({ pending, index }));
      for (let sealing = 1; waiting.length > 0; sealing++) {
        const sealed = await Promise.all(waiting.map(({ pending }) => sealedAccept(content, pending)));
        const answers = await batcher.commitTogether(sealed);
        const again: typeof waiting = [];
        answers.forEach((answer, i) => {
          const item = waiting[i] as (typeof waiting)[number];
          if (answer.outcome !== "data_key_destroyed") results[item.index] = answer;
          else {
            // As for one accept: sealed again under a live key (an erasure in another process).
            content.keys.forgetDestroyed(answer.dataKeyId);
            again.push(item);
          }
        });
        if (again.length > 0 && sealing >= MAX_SEALINGS) {
          throw new Error(
            `the organization's data key was destroyed ${sealing} times while a batch was sealed`,
          );
        }
        waiting = again;
      }
      return results;
    },
    findRecord: orFromPrimary(
      replica && { read: createRecordFinder(replica.sql, content, limits), pause: replica.pause },
      findOnPrimary,
      (record) => record !== undefined,
    ),
    findRecordAfterWrite: findOnPrimary,
    // The history shows no content: its events are read without opening it.
    loadEvents: orFromPrimary(
      replica && {
        read: (organizationId: string, messageId: string) =>
          loadEvents(replica.sql, messageId, organizationId),
        pause: replica.pause,
      },
      (organizationId, messageId) => loadEvents(sql, messageId, organizationId),
      (events) => events.length > 0,
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
    dueAt: pending.dueAt,
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
