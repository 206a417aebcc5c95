import type { Queue } from "bullmq";
import { and, asc, eq, inArray, notExists, type SQL, sql } from "drizzle-orm";
import type { Redis } from "ioredis";
import type { Database } from "../db/client.js";
import { deliveryOutbox, messages, scheduledDeliveries } from "../db/schema.js";
import {
  type DeliveryJobData,
  DeliveryQueues,
  enqueueDelivery,
  strayDeliveryQueueNames,
} from "../src/store/delivery-queue.js";
import { MAX_LOCKS, withJobChangeLocks } from "./job-change-lock.js";

export interface SweepDeps {
  db: Database;
  /** The delivery queue, or its shards. */
  queue: Queue<DeliveryJobData> | DeliveryQueues;
  now: () => Date;
  /** A message younger than this is left alone: its job is probably on its way. */
  graceMs: number;
  pageSize?: number;
}

/**
 * Finds unfinished messages whose delivery job is not in Redis (Redis lost it, or BullMQ gave up
 * on it) and that are not waiting in the delivery outbox either, and enqueues them again, keeping
 * a scheduled retry's time. Safe to run from every worker at once. A job in any delivery queue
 * counts, today's shards or a stray one (the legacy untagged queue, a shard beyond
 * `QUEUE_SHARDS`). A message found without one gets a job in its shard only under its job-change
 * lock, after one more look in Redis and one more read in Postgres (docs/decisions/0041, "The
 * job-change lock", says which races that closes and which it leaves). Returns how many jobs it
 * re-enqueued.
 */
export async function sweep(deps: SweepDeps): Promise<number> {
  const pageSize = deps.pageSize ?? 1000;
  const queues = DeliveryQueues.of(deps.queue);
  const now = deps.now();
  const cutoff = new Date(now.getTime() - deps.graceMs);
  let enqueued = 0;
  let after: { movedAt: Date; messageId: string } | undefined;
  // When a message last moved: its last change, or a scheduled send's `send_at` (the expression
  // of `messages_unfinished_idx`, so scheduled sends still waiting are never read).
  const movedAt = sql<Date>`greatest(${messages.updatedAt}, ${messages.sendAt})`;
  // Unfinished, unmoved since the cutoff, and neither in the outbox nor waiting for its `send_at`.
  const unfinished = and(
    inArray(messages.status, ["accepted", "pending"]),
    sql`${movedAt} < ${cutoff.toISOString()}::timestamptz`,
    // Still in the outbox: the relay will add its job (a backlog there is not a lost job).
    notExists(
      deps.db
        .select({ one: deliveryOutbox.messageId })
        .from(deliveryOutbox)
        .where(eq(deliveryOutbox.messageId, messages.messageId)),
    ),
    // A scheduled send waiting for its `send_at` has no job by design (docs/decisions/0044).
    notExists(
      deps.db
        .select({ one: scheduledDeliveries.messageId })
        .from(scheduledDeliveries)
        .where(eq(scheduledDeliveries.messageId, messages.messageId)),
    ),
  );
  // A job in any delivery queue counts: today's shards, and the stray ones (the legacy queue,
  // shards beyond N) that processes of another count or release still use. Looked up from the
  // legacy queue down to shard 0, the way the workers move jobs (always to a lower shard), so a
  // job moved during the look-up is seen where it arrives. One pipeline per queue: a queue's
  // keys share one slot (a cluster refuses a pipeline across slots).
  const namesNow = async (client: Redis) => [
    ...(await strayDeliveryQueueNames(client, queues.prefix, queues.all.length)),
    ...queues.all.map((queue) => queue.name).reverse(),
  ];
  /**
   * Adds a job for those of `held` (their job-change locks held, decision 0041) still without one,
   * looked for once more in the queues as they are now (a shard may have got its first job since
   * the first look), and still unfinished in Postgres. Returns how many it added.
   */
  const addJobless = async (client: Redis, held: string[]): Promise<number> => {
    if (held.length === 0) return 0;
    const queued = await queuedOf(client, queues.prefix, await namesNow(client), held);
    const jobless = await stillUnfinished(
      deps.db,
      unfinished,
      held.filter((id) => !queued.has(id)),
    );
    for (const row of jobless) {
      const delayMs = row.nextAttemptAt ? row.nextAttemptAt.getTime() - deps.now().getTime() : 0;
      await enqueueDelivery(queues.forMessage(row.messageId), {
        messageId: row.messageId,
        priority: row.priority,
        delayMs,
      });
    }
    return jobless.length;
  };
  for (;;) {
    const page = await deps.db
      .select({
        messageId: messages.messageId,
        movedAt: movedAt.mapWith((value: string | Date) => new Date(value)),
      })
      .from(messages)
      .where(
        and(
          unfinished,
          after
            ? sql`(${movedAt}, ${messages.messageId}) > (${after.movedAt.toISOString()}::timestamptz, ${after.messageId}::uuid)`
            : undefined,
        ),
      )
      .orderBy(asc(movedAt), asc(messages.messageId))
      .limit(pageSize);
    if (page.length === 0) return enqueued;

    // Redis is asked only once there is a page (a pass with nothing to sweep never waits on it).
    const client = (await queues.first.client) as unknown as Redis;
    const ids = page.map((row) => row.messageId);
    const queued = await queuedOf(client, queues.prefix, await namesNow(client), ids);
    const unseen = ids.filter((id) => !queued.has(id));
    for (let from = 0; from < unseen.length; from += MAX_LOCKS)
      enqueued += await withJobChangeLocks(
        client,
        queues.prefix,
        unseen.slice(from, from + MAX_LOCKS),
        (held) => addJobless(client, held),
      );
    const last = page[page.length - 1];
    if (!last || page.length < pageSize) return enqueued;
    after = { movedAt: last.movedAt, messageId: last.messageId };
  }
}

/** Those of `messageIds` that still meet `unfinished` (read again after the looks in Redis). */
async function stillUnfinished(db: Database, unfinished: SQL | undefined, messageIds: string[]) {
  if (messageIds.length === 0) return [];
  return db
    .select({
      messageId: messages.messageId,
      priority: messages.priority,
      nextAttemptAt: messages.nextAttemptAt,
    })
    .from(messages)
    .where(and(inArray(messages.messageId, messageIds), unfinished))
    .orderBy(asc(messages.messageId));
}

/** Which of `messageIds` have a job in one of the queues `names` (an error counts as a job). */
async function queuedOf(
  client: Redis,
  prefix: string,
  names: readonly string[],
  messageIds: readonly string[],
): Promise<Set<string>> {
  const queued = new Set<string>();
  for (const name of names) {
    const pipeline = client.pipeline();
    for (const id of messageIds) pipeline.exists(`${prefix}:${name}:${id}`);
    const results = (await pipeline.exec()) ?? [];
    for (const [index, id] of messageIds.entries()) {
      const [error, exists] = results[index] ?? [null, 1];
      if (error || exists === 1) queued.add(id);
    }
  }
  return queued;
}
