import type { DeliveryQueues } from "../src/store/delivery-queue.js";

export interface UnconsumedShard {
  shard: number;
  queue: string;
  /** Jobs waiting, prioritized or delayed there. */
  jobs: number;
}

/**
 * The shards that hold jobs while no BullMQ Worker is connected to them (review of issue 18,
 * finding 3): a `QUEUE_SHARDS_CONSUMED` pool scaled to zero, or `QUEUE_SHARDS` raised without
 * a pool for the new shards. Their messages would wait for ever while the sweeper counts them
 * as queued, so the worker warns about each one (workers/main.ts) and `/metrics` shows
 * `notification_queue_workers`.
 */
export async function unconsumedShards(queues: DeliveryQueues): Promise<UnconsumedShard[]> {
  const found: UnconsumedShard[] = [];
  for (const [shard, queue] of queues.all.entries()) {
    const counts = await queue.getJobCounts("wait", "prioritized", "delayed");
    const jobs = (counts.wait ?? 0) + (counts.prioritized ?? 0) + (counts.delayed ?? 0);
    if (jobs > 0 && (await queue.getWorkersCount()) === 0) found.push({ shard, queue: queue.name, jobs });
  }
  return found;
}
