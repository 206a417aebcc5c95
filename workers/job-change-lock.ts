import { randomUUID } from "node:crypto";
import type { Cluster, Redis } from "ioredis";

/**
 * How long a message's job-change lock holds at most: far longer than its holder's look, remove
 * and add take (the sweeper locks at most {@link MAX_LOCKS} messages at a time), so it runs out
 * only when its holder died or its Redis or Postgres stalled; then the next pass moves or sweeps
 * the message.
 */
const LOCK_MS = 10_000;
/** The most messages one call locks: the sweeper adds their jobs one by one while it holds them. */
export const MAX_LOCKS = 100;

/** Deletes the lock only if it is still the caller's (a lock that ran out may be another's now). */
const RELEASE =
  "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end return 0";

/**
 * Runs `change` with the ids of `messageIds` (at most {@link MAX_LOCKS}) whose job-change locks it
 * took; an id whose lock another process holds is left out (that one is changing the message's
 * job). The stray mover and the sweeper take these locks before they change a message's job
 * (docs/decisions/0041, "The job-change lock"). One key a message (`<prefix>:job-change:<id>`, not
 * under a queue's name), so it works on a cluster. If Redis refuses a lock, those taken are
 * released and its error is thrown; a release that fails is left to run out.
 */
export async function withJobChangeLocks<T>(
  client: Redis | Cluster,
  prefix: string,
  messageIds: readonly string[],
  change: (held: string[]) => Promise<T>,
): Promise<T> {
  if (messageIds.length > MAX_LOCKS) throw new Error(`at most ${MAX_LOCKS} job-change locks at once`);
  const token = randomUUID();
  const key = (id: string) => `${prefix}:job-change:${id}`;
  const release = (ids: string[]) =>
    Promise.allSettled(ids.map((id) => client.eval(RELEASE, 1, key(id), token)));
  const taken = await Promise.allSettled(
    messageIds.map((id) => client.set(key(id), token, "PX", LOCK_MS, "NX")),
  );
  const held = messageIds.filter((_, index) => {
    const result = taken[index];
    return result?.status === "fulfilled" && result.value === "OK";
  });
  const refused = taken.find((result) => result.status === "rejected");
  if (refused) {
    await release(held);
    throw refused.reason;
  }
  try {
    return await change(held);
  } finally {
    await release(held);
  }
}
