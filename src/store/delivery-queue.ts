import { type JobsOptions, Queue } from "bullmq";
import calculateSlot from "cluster-key-slot";
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
}

export function createDeliveryQueue(connection: Redis | Cluster, prefix: string): Queue<DeliveryJobData> {
  return new Queue<DeliveryJobData>(DELIVERY_QUEUE, { connection, prefix });
}

/** Redis Cluster's hash slots. */
const SLOTS = 16384;

/**
 * The name of delivery queue shard `shard` (0-based) of `shards`. Shard 0 is `{deliveries}`, the
 * one queue of `QUEUE_SHARDS=1`, kept whatever the count. Shard k's hash tag is the first
 * `deliveries-k-<n>` whose slot lies in the k-th of `shards` equal slot ranges, so on a cluster
 * whose slots are split evenly between masters (what `redis-cli --cluster create` does) the
 * shards land on different masters instead of where plain names happen to hash.
 */
export function deliveryQueueName(shard: number, shards: number): string {
  if (shard === 0) return DELIVERY_QUEUE;
  const from = Math.floor((shard * SLOTS) / shards);
  const to = Math.floor(((shard + 1) * SLOTS) / shards);
  for (let n = 0; ; n++) {
    const tag = `deliveries-${shard}-${n}`;
    const slot = calculateSlot(tag);
    if (slot >= from && slot < to) return `{${tag}}`;
  }
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
        (_, shard) => new Queue<DeliveryJobData>(deliveryQueueName(shard, shards), { connection, prefix }),
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
