import { type JobsOptions, Queue } from "bullmq";
import type { Cluster, Redis } from "ioredis";
import { type PriorityTier, QUEUE_PRIORITY } from "../domain/priority.js";

/**
 * The delivery queue's name. The braces are a Redis Cluster hash tag: every key of the queue
 * (`<prefix>:{deliveries}:…`) hashes to one slot, as BullMQ's scripts need on a cluster (they
 * touch several keys at once; without the tag: CROSSSLOT). On one node the tag changes nothing
 * but the key names (docs/decisions/0041 says how an upgrade moves from `deliveries`).
 */
export const DELIVERY_QUEUE = "{deliveries}";

export interface DeliveryJobData {
  messageId: string;
  /**
   * The turn a throughput limit gave the message when it held it back (docs/decisions/0048): the
   * limit's key and the turn (microseconds of Redis's clock). The job comes back to it; a job with
   * one may take a token while newer messages queue behind the line.
   */
  throughput?: { key: string; turn: number };
}

export function createDeliveryQueue(connection: Redis | Cluster, prefix: string): Queue<DeliveryJobData> {
  return new Queue<DeliveryJobData>(DELIVERY_QUEUE, { connection, prefix });
}

/** The delivery queue's name before hash tags: a release older than decision 0041 used it. */
export const LEGACY_DELIVERY_QUEUE = "deliveries";

/**
 * The hash tag of every delivery queue shard, fixed for ever: shard k is `{SHARD_TAGS[k]}` whatever
 * `QUEUE_SHARDS` is, so changing the count only adds or drops shards, and a job never changes
 * queue because of the count (review of issue 18, finding 1). Shard 0 is `{deliveries}`, the one
 * queue of `QUEUE_SHARDS=1`. The tags were chosen (once, by a search over `cluster-key-slot`) so
 * that for every N from 1 to 12 the first N shards lie in N different ones of N equal slot ranges:
 * on a cluster of N masters with its slots split evenly (`redis-cli --cluster create`), each
 * shard has a master of its own, shard 0 (slot 3880) included. Beyond 12 they are spread but no
 * longer one per range. Never edit or reorder this list: the names are where jobs are.
 */
const SHARD_TAGS = [
  "deliveries",
  "deliveries-1-155",
  "deliveries-2-138",
  "deliveries-3-279",
  "deliveries-4-160",
  "deliveries-5-187",
  "deliveries-6-32",
  "deliveries-7-65",
  "deliveries-8-611",
  "deliveries-9-400",
  "deliveries-10-302",
  "deliveries-11-306",
  "deliveries-12-64",
  "deliveries-13-39",
  "deliveries-14-3",
  "deliveries-15-252",
  "deliveries-16-351",
  "deliveries-17-42",
  "deliveries-18-305",
  "deliveries-19-260",
  "deliveries-20-313",
  "deliveries-21-159",
  "deliveries-22-189",
  "deliveries-23-33",
  "deliveries-24-122",
  "deliveries-25-135",
  "deliveries-26-260",
  "deliveries-27-449",
  "deliveries-28-168",
  "deliveries-29-177",
  "deliveries-30-239",
  "deliveries-31-226",
  "deliveries-32-162",
  "deliveries-33-648",
  "deliveries-34-12",
  "deliveries-35-363",
  "deliveries-36-558",
  "deliveries-37-221",
  "deliveries-38-701",
  "deliveries-39-42",
  "deliveries-40-204",
  "deliveries-41-209",
  "deliveries-42-302",
  "deliveries-43-316",
  "deliveries-44-341",
  "deliveries-45-375",
  "deliveries-46-353",
  "deliveries-47-42",
  "deliveries-48-222",
  "deliveries-49-420",
  "deliveries-50-776",
  "deliveries-51-176",
  "deliveries-52-228",
  "deliveries-53-54",
  "deliveries-54-142",
  "deliveries-55-300",
  "deliveries-56-329",
  "deliveries-57-336",
  "deliveries-58-1",
  "deliveries-59-94",
  "deliveries-60-54",
  "deliveries-61-165",
  "deliveries-62-146",
  "deliveries-63-207",
] as const;

/** The most shards there can be (`QUEUE_SHARDS`' maximum). */
export const MAX_QUEUE_SHARDS = SHARD_TAGS.length;

/** The name of delivery queue shard `shard` (0-based), the same for every shard count. */
export function deliveryQueueName(shard: number): string {
  const tag = SHARD_TAGS[shard];
  if (tag === undefined)
    throw new RangeError(`no delivery queue shard ${shard} (0 to ${MAX_QUEUE_SHARDS - 1})`);
  return `{${tag}}`;
}

/**
 * The delivery queues outside today's `shards` that hold or held jobs (their job counter key
 * exists): the untagged queue of an older release, and shards a larger count had, or that
 * processes of a larger count still feed during a rolling change. Nobody consumes them as
 * shards; the workers move their jobs into the messages' shards (workers/stray-jobs.ts) and the
 * sweeper looks in them before adding a job again. The legacy queue comes first, then shards from
 * the highest: the order jobs move in (to lower shards), which the sweeper's look-up relies on.
 */
export async function strayDeliveryQueueNames(
  client: Redis | Cluster,
  prefix: string,
  shards: number,
): Promise<string[]> {
  const candidates = [
    LEGACY_DELIVERY_QUEUE,
    ...Array.from({ length: MAX_QUEUE_SHARDS - shards }, (_, i) =>
      deliveryQueueName(MAX_QUEUE_SHARDS - 1 - i),
    ),
  ];
  const present = await Promise.all(candidates.map((name) => client.exists(`${prefix}:${name}:id`)));
  return candidates.filter((_, index) => present[index] === 1);
}

/**
 * The shard of a message: FNV-1a (32 bits) of its id, modulo the shard count. Stable across
 * processes, restarts and versions; the same id always lands on the same shard for one count.
 */
export function shardOf(messageId: string, shards: number): number {
  let hash = 0x811c9dc5;
  for (let i = 0; i < messageId.length; i++) {
    hash ^= messageId.charCodeAt(i);
    hash = Math.imul(hash, 0x01000193) >>> 0;
  }
  return hash % shards;
}

/**
 * The delivery queue's shards (`QUEUE_SHARDS`, docs/decisions/0041): every message's job goes to
 * the shard of its id; BullMQ's priority order holds within each shard.
 */
export class DeliveryQueues {
  readonly all: readonly Queue<DeliveryJobData>[];

  constructor(all: readonly Queue<DeliveryJobData>[]) {
    if (all.length === 0) throw new Error("at least one delivery queue");
    this.all = all;
  }

  /** `shards` queues on one connection, under one prefix. */
  static create(connection: Redis | Cluster, prefix: string, shards: number): DeliveryQueues {
    return new DeliveryQueues(
      Array.from(
        { length: shards },
        (_, shard) => new Queue<DeliveryJobData>(deliveryQueueName(shard), { connection, prefix }),
      ),
    );
  }

  /** Shards as they are, or one queue as the only shard. */
  static of(queues: Queue<DeliveryJobData> | DeliveryQueues): DeliveryQueues {
    return queues instanceof DeliveryQueues ? queues : new DeliveryQueues([queues]);
  }

  /** The BullMQ prefix (`QUEUE_PREFIX`), which is also the delivery outbox's `queue_prefix`. */
  get prefix(): string {
    return this.all[0]?.opts.prefix ?? "bull";
  }

  /** Shard 0: the queue whose connection the limits and readiness use. */
  get first(): Queue<DeliveryJobData> {
    return this.all[0] as Queue<DeliveryJobData>;
  }

  forMessage(messageId: string): Queue<DeliveryJobData> {
    return this.all[shardOf(messageId, this.all.length)] as Queue<DeliveryJobData>;
  }

  on(event: "error", listener: (error: Error) => void): void {
    for (const queue of this.all) queue.on(event, listener);
  }

  async close(): Promise<void> {
    await Promise.all(this.all.map((queue) => queue.close()));
  }
}

/** BullMQ options of a message's delivery job (the outbox relay and the sweeper add it the same way). */
export function deliveryJobOptions(job: {
  messageId: string;
  priority: number;
  delayMs?: number;
}): JobsOptions {
  return {
    jobId: job.messageId,
    priority: job.priority,
    delay: job.delayMs && job.delayMs > 0 ? job.delayMs : undefined,
    // Infrastructure failures (database down) are retried by BullMQ with backoff; provider
    // failures never reach BullMQ: they are decided and scheduled by the domain.
    attempts: 20,
    backoff: { type: "exponential", delay: 1000 },
    removeOnComplete: true,
    removeOnFail: true,
  };
}

/**
 * Adds the delivery job of a message. The job id is the message id, so adding it twice while it
 * exists is a no-op. Finished jobs are removed: the events are the history, and the sweeper can
 * then re-add a job for any message whose job was lost.
 */
export async function enqueueDelivery(
  queue: Queue<DeliveryJobData>,
  job: { messageId: string; priority: PriorityTier; delayMs?: number },
): Promise<void> {
  await queue.add(
    "deliver",
    { messageId: job.messageId },
    deliveryJobOptions({ ...job, priority: QUEUE_PRIORITY[job.priority] }),
  );
}
