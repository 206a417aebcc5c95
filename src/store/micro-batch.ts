import { QueueRefusedError } from "../../db/errors.js";
export interface MicroBatchOptions extends QueueLimits {
  /** Most items handed to `run` at once. */
  maxBatch: number;
  /** Most `run` calls in flight at once; further items wait and join the next batch. */
  maxInFlight: number;
  /**
   * Whether a failed batch of several items is run again one item at a time (so one bad item
   * fails alone). Not worth it when the failure would hit every item (the database is down).
   * A batch that fails must have done nothing: its items are run again as if never run.
   */
  retryOneByOne: (error: unknown) => boolean;
}

/** How much may wait for `run`, so that a stalled `run` (a locked table, a frozen connection) costs a bounded amount. */
export interface QueueLimits {
  /** Most items waiting to join a batch; one more is refused at once ({@link QueueRefusedError}). Unset: no bound. */
  maxWaiting?: number;
  /**
   * How long an item may wait, from when it was submitted: one that has waited longer is dropped
   * before a batch takes it (or before a failed batch is run again one by one), since whoever
   * submitted it has been answered by then. An item already inside a `run` is not taken back.
   * Unset: no limit.
   */
  maxWaitMs?: number;
}

/**
 * Items of a failed batch run again one by one, at most this many at a time: each takes a
 * connection, and a batch of 200 at once would take the whole pool from every other request.
 */
const ONE_BY_ONE_IN_FLIGHT = 4;

interface Waiting<I, O> {
  item: I;
  /** `performance.now()` past which the item is dropped rather than run. */
  expiresAt: number;
  resolve: (result: O) => void;
  reject: (error: unknown) => void;
}

/**
 * Groups calls that arrive together into one call of `run`: every item submitted while the event
 * loop is busy, or while `maxInFlight` runs are under way, joins the next batch. At low load each
 * item runs alone with no added delay (the batch goes out on the next turn of the loop); under
 * load the batches grow by themselves. `run` returns one result per item, in order.
 */
export function microBatch<I, O>(
  run: (items: I[]) => Promise<O[]>,
  options: MicroBatchOptions,
): (item: I) => Promise<O> {
  const { maxBatch, maxInFlight, retryOneByOne, maxWaitMs } = options;
  const maxWaiting = options.maxWaiting ?? Number.POSITIVE_INFINITY;
  const waiting: Array<Waiting<I, O>> = [];
  let inFlight = 0;
  let scheduled = false;

  const schedule = () => {
    if (scheduled) return;
    scheduled = true;
    // After the current I/O callbacks, so that items submitted in the same turn share a batch.
    setImmediate(() => {
      scheduled = false;
      flush();
    });
  };

  /** Rejects the waiting items past their deadline: all share `maxWaitMs`, so they are the oldest, first in line. */
  const dropExpired = (now: number) => {
    let expired = 0;
    while (expired < waiting.length && (waiting[expired] as Waiting<I, O>).expiresAt <= now) expired++;
    if (expired === 0) return;
    for (const w of waiting.splice(0, expired)) w.reject(new QueueRefusedError("deadline_passed"));
  };

  const flush = () => {
    if (maxWaitMs !== undefined) dropExpired(performance.now());
    while (waiting.length > 0 && inFlight < maxInFlight) {
      const batch = waiting.splice(0, maxBatch);
      inFlight++;
      void runBatch(batch).finally(() => {
        inFlight--;
        if (waiting.length > 0) schedule();
      });
    }
  };

  const settle = async (batch: Array<Waiting<I, O>>) => {
    const results = await run(batch.map((w) => w.item));
    if (results.length !== batch.length)
      throw new Error(`batch of ${batch.length} gave ${results.length} results`);
    for (const [i, w] of batch.entries()) w.resolve(results[i] as O);
  };

  const runBatch = async (batch: Array<Waiting<I, O>>) => {
    try {
      await settle(batch);
    } catch (error) {
      if (batch.length === 1 || !retryOneByOne(error)) {
        for (const w of batch) w.reject(error);
        return;
      }
      await runOneByOne(batch);
    }
  };

  /** Runs a failed batch's items alone, a few at a time; once one meets an error worth no retry, the rest get it too. */
  const runOneByOne = async (batch: Array<Waiting<I, O>>) => {
    let next = 0;
    let giveUp: { error: unknown } | undefined;
    const lane = async () => {
      while (next < batch.length) {
        const w = batch[next++] as Waiting<I, O>;
        if (giveUp) {
          w.reject(giveUp.error);
        } else if (w.expiresAt <= performance.now()) {
          // Its client has been answered: not worth a statement of its own now.
          w.reject(new QueueRefusedError("deadline_passed"));
        } else {
          try {
            await settle([w]);
          } catch (error) {
            w.reject(error);
            if (!retryOneByOne(error)) giveUp = { error };
          }
        }
      }
    };
    await Promise.all(Array.from({ length: Math.min(ONE_BY_ONE_IN_FLIGHT, batch.length) }, lane));
  };

  return (item: I) =>
    new Promise<O>((resolve, reject) => {
      let expiresAt = Number.POSITIVE_INFINITY;
      if (maxWaitMs !== undefined) {
        const now = performance.now();
        expiresAt = now + maxWaitMs;
        // While `run` is stalled nothing flushes: settle the expired items now, and make room.
        dropExpired(now);
      }
      if (waiting.length >= maxWaiting) {
        reject(new QueueRefusedError("queue_full"));
        return;
      }
      waiting.push({ item, expiresAt, resolve, reject });
      schedule();
    });
}
