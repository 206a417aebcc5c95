export interface MicroBatchOptions {
  /** Most items handed to `run` at once. */
  maxBatch: number;
  /** Most `run` calls in flight at once; further items wait and join the next batch. */
  maxInFlight: number;
  /**
   * Whether a failed batch of several items is run again one item at a time (so one bad item
   * fails alone). Not worth it when the failure would hit every item (the database is down).
   */
  retryOneByOne: (error: unknown) => boolean;
}

interface Waiting<I, O> {
  item: I;
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

  const flush = () => {
    while (waiting.length > 0 && inFlight < options.maxInFlight) {
      const batch = waiting.splice(0, options.maxBatch);
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
      if (batch.length === 1 || !options.retryOneByOne(error)) {
        for (const w of batch) w.reject(error);
        return;
      }
      await Promise.all(batch.map((w) => settle([w]).catch(w.reject)));
    }
  };

  return (item: I) =>
    new Promise<O>((resolve, reject) => {
      waiting.push({ item, resolve, reject });
      schedule();
    });
}
