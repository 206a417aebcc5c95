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
}

export function createDeliveryQueue(connection: Redis | Cluster, prefix: string): Queue<DeliveryJobData> {
  return new Queue<DeliveryJobData>(DELIVERY_QUEUE, { connection, prefix });
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
