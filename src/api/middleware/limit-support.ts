import type { Queue } from "bullmq";
import type { Context } from "hono";
import { Cluster, Redis } from "ioredis";
import type { Logger } from "../../runtime/logger.js";
import type { MessageStore } from "../../store/message-store.js";
import type { AppEnv } from "../types.js";

/** What the send rate limit and the daily quota share: their Redis, its time-out, their warnings and batching. */

/**
 * Where every limit's keys live: `<QUEUE_PREFIX>:{limits}:<limit>:…`. The hash tag puts the keys
 * of every limit and organization in one slot, so on a Redis Cluster a web process's limit
 * commands of one turn of its event loop go to one master in one write, as on a single node,
 * rather than to every master that holds some organization's key (docs/decisions/0041).
 */
export function limitKeyPrefix(queuePrefix: string, limit: string): string {
  return `${queuePrefix}:{limits}:${limit}`;
}

/** Past this a limit's Redis counts as unavailable for that request. */
export const REDIS_TIMEOUT_MS = 250;
const WARN_EVERY_MS = 10_000;

/** Why a call to Redis was given up: it did not answer in time (it may still run the command). */
export class RedisTimeoutError extends Error {}

export function withTimeout<T>(promise: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new RedisTimeoutError(`Redis did not answer within ${ms} ms`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

/**
 * The ioredis client a BullMQ queue was built with, if it was given one (the API's fail-fast
 * client): one node's, or a Redis Cluster's (every limit key is one key, so it runs there as is).
 */
export function redisOfQueue(queue: Pick<Queue, "opts"> | undefined): Redis | Cluster | undefined {
  const connection = queue?.opts.connection;
  return connection instanceof Redis || connection instanceof Cluster ? connection : undefined;
}

/** A warning logged at most once every 10 s, however many requests see the same trouble. */
export function throttledWarning(logger: Logger, message: string): (error?: unknown) => void {
  let lastWarnedAt = 0;
  return (error) => {
    if (Date.now() - lastWarnedAt < WARN_EVERY_MS) return;
    lastWarnedAt = Date.now();
    if (error === undefined) logger.warn(message);
    else logger.warn({ err: error }, message);
  };
}

/** The positions of each distinct key, in order: one call to Redis per key, for all its requests. */
export function positionsByKey<K>(keys: readonly K[]): Map<K, number[]> {
  const positions = new Map<K, number[]>();
  keys.forEach((key, index) => {
    const list = positions.get(key);
    if (list) list.push(index);
    else positions.set(key, [index]);
  });
  return positions;
}

/**
 * Whether a send a limit would refuse is the retry of one already accepted: it carries an
 * `Idempotency-Key` the organization holds, so its answer is the replay of the first 202 (whose
 * answer may have been lost), never a 429. Asked only on the refusal path (one indexed read).
 */
export async function isReplay(
  c: Context<AppEnv>,
  deps: { store?: Pick<MessageStore, "holdsIdempotencyKey">; now: () => Date },
): Promise<boolean> {
  const key = c.req.header("idempotency-key");
  if (!key || !deps.store) return false;
  return deps.store.holdsIdempotencyKey(c.get("organization").id, key, deps.now());
}
