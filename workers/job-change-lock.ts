import { randomUUID } from "node:crypto";
import type { Cluster, Redis } from "ioredis";

/**
 * How long a message's job-change lock holds at most: far longer than a look, a remove and an add
 * take, so it only runs out when its holder died or its Redis stalled; then the next pass moves or
 * sweeps the message.
 */
const LOCK_MS = 10_000;

/** Deletes the lock only if it is still the caller's (a lock that ran out may be another's now). */
const RELEASE =
  "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end return 0";

/**
 * Runs `change` holding the locks it could take of those on `messageIds`' delivery jobs
 * (docs/decisions/0041), given the ids it holds: the stray mover (a remove, then an add) and the
 * sweeper (a look in every queue, then an add) take them, so neither sees the other's move half
 * done, and two of either, of two shard counts, never both add a job for one message. An id whose
 * lock another holds is left out (that one is changing the message's job; the next pass looks
 * again). One key a message, so it works on a cluster; not a key of a BullMQ queue
 * (`<prefix>:job-change:<id>`, not under a queue's name).
 */
export async function withJobChangeLocks<T>(
  client: Redis | Cluster,
  prefix: string,
  messageIds: readonly string[],
  change: (held: string[]) => Promise<T>,
): Promise<T> {
  const token = randomUUID();
  const key = (id: string) => `${prefix}:job-change:${id}`;
  const taken = await Promise.all(messageIds.map((id) => client.set(key(id), token, "PX", LOCK_MS, "NX")));
  const held = messageIds.filter((_, index) => taken[index] === "OK");
  try {
    return await change(held);
  } finally {
    await Promise.all(held.map((id) => client.eval(RELEASE, 1, key(id), token)));
  }
}
