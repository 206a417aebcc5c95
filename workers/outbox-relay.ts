import type { Queue } from "bullmq";
import type postgres from "postgres";
import type { Logger } from "../src/runtime/logger.js";
import type { RedisHealth } from "../src/runtime/redis-health.js";
import { type DeliveryJobData, DeliveryQueues, deliveryJobOptions } from "../src/store/delivery-queue.js";
import { runStatementPlannedEachTime } from "../src/store/statement.js";
import { type TurnCursor, takeInTurns } from "./relay-turns.js";

export interface OutboxRelayDeps {
  sql: postgres.Sql;
  /** The delivery queue, or its shards: each row's job goes to the shard of its message id. */
  queue: Queue<DeliveryJobData> | DeliveryQueues;
  logger: Logger;
  /** Most rows moved per transaction (one addBulk). */
  batchSize?: number;
  /** Pause between polls while the outbox is empty. */
  idleMs?: number;
  /** Past this an addBulk counts as failed and the rows stay (a patient Redis client would wait forever). */
  addTimeoutMs?: number;
  /**
   * Whether Redis takes writes: while it persistently refuses them (a replica, OOM) the relay
   * makes no calls and waits, and its errors are counted there instead of logged.
   */
  redisHealth?: Pick<RedisHealth, "stall" | "report">;
  /** Only rows of this BullMQ priority or more urgent (1 = critical); default: every row. */
  maxPriority?: number;
  /**
   * Fairness between organizations (`QUEUE_WAITING_LIMIT`, docs/decisions/0047): the most jobs a
   * shard may have waiting before the relay adds more, and the rows of a tier taken in turns by
   * organization (workers/relay-turns.ts). The critical lane is never held back. 0 or unset: rows
   * move as fast as Redis takes them, in id order.
   */
  waitingLimit?: number;
  /** Where the turns of each tier stopped (one per relay loop). */
  turns?: TurnCursor;
}

const DEFAULT_BATCH_SIZE = 200;
const DEFAULT_IDLE_MS = 20;
const DEFAULT_ADD_TIMEOUT_MS = 5000;
const MAX_ERROR_BACKOFF_MS = 5000;
/** How often a relay paused by a Redis that refuses writes looks whether it takes them again. */
const STALLED_POLL_MS = 1000;
const LEAST_URGENT = 32767;
/** The BullMQ priority of the critical tier, which gets a relay lane of its own. */
const CRITICAL = 1;

/** Whether any row of the prefix waits in tiers 1 to `$2`. */
const ANY_WAITING = "select 1 from delivery_outbox where queue_prefix = $1 and priority <= $2 limit 1";

/** The oldest `$3` rows of tiers 1 to `$2`, most urgent first, locked (relays in other workers take others). */
const OLDEST_FIRST = `
  select message_id, priority from delivery_outbox
  where queue_prefix = $1 and priority <= $2
  order by priority, message_id
  limit $3
  for update skip locked`;

/**
 * The rows whose jobs the queue took, by their key alone (a message id is the key of the whole
 * table): given the prefix too, Postgres may read the prefix's every row through the relay index
 * and filter them, believing the table holds a few hundred.
 */
const RELAYED = "delete from delivery_outbox where message_id = any($1::uuid[])";

/**
 * Moves up to `batchSize` rows of this queue's outbox into BullMQ, most urgent first: takes them
 * (`FOR UPDATE SKIP LOCKED`, so relays in several workers share the work), adds their jobs with
 * one `addBulk`, and deletes them in the same transaction. If Redis fails the transaction rolls
 * back and the rows wait for the next pass; with shards, one `addBulk` per shard, and only the
 * rows of the shards that took them are deleted (a shard whose master is failing over holds
 * back its own rows only); if the process dies between the add and the commit
 * the rows are added again, which is harmless: the job id is the message id, and a job that
 * already ran finds its message final. Returns how many rows it moved.
 */
export async function relayOutboxOnce(deps: OutboxRelayDeps): Promise<number> {
  const { sql } = deps;
  const queues = DeliveryQueues.of(deps.queue);
  const prefix = queues.prefix;
  const limit = deps.batchSize ?? DEFAULT_BATCH_SIZE;
  const maxPriority = deps.maxPriority ?? LEAST_URGENT;
  // A cheap look first: an idle relay costs one indexed read per poll, not a transaction.
  const [waiting] = await runStatementPlannedEachTime(sql, ANY_WAITING, [prefix, maxPriority]);
  if (!waiting) return 0;
  const fair = (deps.waitingLimit ?? 0) > 0 && maxPriority > CRITICAL;
  const room = fair ? await roomPerShard(queues, deps.waitingLimit ?? 0) : undefined;
  const budget = room
    ? Math.min(
        limit,
        [...room.values()].reduce((sum, n) => sum + n, 0),
      )
    : limit;
  if (budget === 0) return 0;
  const { relayed, failure } = await sql.begin(async (tx) => {
    const rows = fair
      ? await takeInTurns(tx, { prefix, maxPriority, budget, cursor: deps.turns ?? new Map() })
      : await runStatementPlannedEachTime<Array<{ message_id: string; priority: number }>>(tx, OLDEST_FIRST, [
          prefix,
          maxPriority,
          limit,
        ]);
    if (rows.length === 0) return { relayed: 0, failure: undefined };
    const byShard = new Map<Queue<DeliveryJobData>, Array<{ message_id: string; priority: number }>>();
    for (const row of rows) {
      const queue = queues.forMessage(row.message_id);
      const list = byShard.get(queue);
      // A shard with no room left keeps its rows in the outbox for a later pass.
      if (room && (list?.length ?? 0) >= (room.get(queue) ?? 0)) continue;
      if (list) list.push(row);
      else byShard.set(queue, [row]);
    }
    // Each shard on its own: a shard whose master is away keeps its rows for the next pass, the
    // others' rows leave the outbox (one shard's failure no longer holds every shard back).
    const shards = Array.from(byShard);
    const results = await Promise.allSettled(
      shards.map(([queue, shardRows]) =>
        withTimeout(
          queue.addBulk(
            shardRows.map((row) => ({
              name: "deliver",
              data: { messageId: row.message_id },
              opts: deliveryJobOptions({ messageId: row.message_id, priority: row.priority }),
            })),
          ),
          deps.addTimeoutMs ?? DEFAULT_ADD_TIMEOUT_MS,
        ),
      ),
    );
    const added: string[] = [];
    let failure: unknown;
    results.forEach((result, index) => {
      if (result.status === "fulfilled")
        added.push(...(shards[index]?.[1] ?? []).map((row) => row.message_id));
      else failure ??= result.reason;
    });
    if (added.length > 0) {
      await runStatementPlannedEachTime(tx, RELAYED, [added]);
    }
    return { relayed: added.length, failure };
  });
  if (failure !== undefined) {
    // Nothing moved: the loop backs off and reports it. Some shards moved: go on, and say which failed.
    if (relayed === 0) throw failure;
    deps.logger.warn(
      { err: failure },
      "outbox relay: a delivery queue shard refused its jobs; its rows wait",
    );
  }
  return relayed;
}

/**
 * How many more jobs each shard may take before it holds `limit` waiting (its `wait` and
 * `prioritized` jobs; delayed retries and jobs being delivered are not in the way of new ones).
 */
async function roomPerShard(
  queues: DeliveryQueues,
  limit: number,
): Promise<Map<Queue<DeliveryJobData>, number>> {
  const counts = await Promise.all(queues.all.map((queue) => queue.getJobCounts("wait", "prioritized")));
  return new Map(
    queues.all.map((queue, i) => {
      const waiting = (counts[i]?.wait ?? 0) + (counts[i]?.prioritized ?? 0);
      return [queue, Math.max(0, limit - waiting)];
    }),
  );
}

export interface OutboxRelay {
  /** Stops polling and waits for the pass in progress. */
  stop(): Promise<void>;
}

/**
 * Runs {@link relayOutboxOnce} in two loops: one for every row, and a lane of its own for the
 * critical tier, so an OTP never waits behind a bulk pass of a low-priority backlog (each loop
 * goes again at once while it finds full batches, polls every `idleMs` while it finds nothing,
 * and backs off with a warning while Postgres or Redis fails).
 */
export function startOutboxRelay(deps: OutboxRelayDeps): OutboxRelay {
  const lanes = [
    runRelayLoop({ ...deps, maxPriority: undefined }),
    runRelayLoop({ ...deps, maxPriority: CRITICAL, batchSize: Math.min(50, deps.batchSize ?? 50) }),
  ];
  return {
    async stop() {
      await Promise.all(lanes.map((lane) => lane.stop()));
    },
  };
}

function runRelayLoop(deps: OutboxRelayDeps): OutboxRelay {
  const batchSize = deps.batchSize ?? DEFAULT_BATCH_SIZE;
  const turns: TurnCursor = new Map();
  const idleMs = deps.idleMs ?? DEFAULT_IDLE_MS;
  let stopped = false;
  let wake: (() => void) | undefined;
  const pause = (ms: number) =>
    new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, ms);
      wake = () => {
        clearTimeout(timer);
        resolve();
      };
    });

  const loop = (async () => {
    let failures = 0;
    while (!stopped) {
      if (deps.redisHealth?.stall) {
        await pause(STALLED_POLL_MS);
        continue;
      }
      try {
        const moved = await relayOutboxOnce({ ...deps, batchSize, turns });
        failures = 0;
        // Taking turns, a pass may move less than a batch with more rows waiting (an organization
        // with few rows left its share unused): go again until a pass finds nothing to move.
        if (deps.waitingLimit ? moved === 0 : moved < batchSize) await pause(idleMs);
      } catch (error) {
        if (deps.redisHealth?.report(error)) {
          // Counted there; wait even when it is not stalled (closed at shutdown).
          await pause(STALLED_POLL_MS);
          continue;
        }
        failures++;
        if (failures === 1 || failures % 20 === 0) {
          deps.logger.warn({ err: error, failures }, "outbox relay failed; retrying");
        }
        await pause(Math.min(MAX_ERROR_BACKOFF_MS, idleMs * 2 ** Math.min(failures, 10)));
      }
    }
  })();

  return {
    async stop() {
      stopped = true;
      wake?.();
      await loop;
    },
  };
}

function withTimeout<T>(promise: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`addBulk timed out after ${ms} ms`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}
