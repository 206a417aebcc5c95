import { type Job, Queue } from "bullmq";
import type { Cluster, Redis } from "ioredis";
import {
  type DeliveryJobData,
  type DeliveryQueues,
  deliveryJobOptions,
  strayDeliveryQueueNames,
} from "../src/store/delivery-queue.js";
import { withJobChangeLocks } from "./job-change-lock.js";

/** BullMQ's delayed set scores a job `due timestamp * 0x1000 + counter`. */
const DELAYED_SCORE_SHIFT = 0x1000;

/**
 * Moves the jobs of the stray delivery queues (the untagged queue of an older release, shards
 * beyond today's `QUEUE_SHARDS`) into their messages' shards, keeping each job's data, priority and
 * due time; returns how many it moved. Each move holds the message's job-change lock and reads the
 * job again under it: since the list was read, it may have ended or been moved by a mover of
 * another count (docs/decisions/0041, "The job-change lock"). The job is then removed, which
 * BullMQ refuses while a worker holds it (that job is left to finish where it runs), and added to
 * the message's shard under the same job id, a no-op when the message has a job there already. A
 * crash between the two steps leaves the message without a job: the sweeper adds it again after
 * SWEEP_GRACE_MS. At most `limit` jobs a queue a pass.
 */
export async function moveStrayJobs(
  client: Redis | Cluster,
  queues: DeliveryQueues,
  now: () => number,
  limit = 1000,
): Promise<number> {
  let moved = 0;
  for (const name of await strayDeliveryQueueNames(client, queues.prefix, queues.all.length)) {
    const stray = new Queue<DeliveryJobData>(name, { connection: client, prefix: queues.prefix });
    stray.on("error", () => {});
    try {
      const jobs = await stray.getJobs(["wait", "prioritized", "delayed", "paused"], 0, limit - 1);
      for (const job of jobs) {
        if (await moveOne(client, stray, job, queues, now)) moved++;
      }
    } finally {
      await stray.close();
    }
  }
  return moved;
}

async function moveOne(
  client: Redis | Cluster,
  stray: Queue<DeliveryJobData>,
  job: Job<DeliveryJobData>,
  queues: DeliveryQueues,
  now: () => number,
): Promise<boolean> {
  const messageId = job.data?.messageId;
  const jobId = job.id;
  if (!jobId || !messageId) return false;
  return withJobChangeLocks(client, queues.prefix, [messageId], async (held) => {
    if (held.length === 0) return false; // another process is changing its job
    // The list is older than this: the job may have ended, or been moved by a mover of another
    // count, or handed back to a throughput turn, since. BullMQ's remove of a job that is gone
    // succeeds, so it is read again first.
    const current = await stray.getJob(jobId);
    if (!current || current.finishedOn || current.data?.messageId !== messageId) return false;
    const score = await client.zscore(stray.toKey("delayed"), jobId);
    try {
      await current.remove();
    } catch {
      return false; // a worker took it meanwhile: it runs where it is
    }
    const dueAt = score === null ? 0 : Math.floor(Number(score) / DELAYED_SCORE_SHIFT);
    // Its data as it is (a throughput turn, decision 0048, included), its priority and due time.
    await queues
      .forMessage(messageId)
      .add(
        "deliver",
        current.data,
        deliveryJobOptions({ messageId, priority: current.opts.priority ?? 0, delayMs: dueAt - now() }),
      );
    return true;
  });
}
