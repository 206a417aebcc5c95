import { describe, expect, it } from "vitest";
import { QueueRefusedError } from "../../../db/errors.js";
import { microBatch } from "../../../src/store/micro-batch.js";

/**
 * The grouping under every database path of the API (src/store/micro-batch.ts), on its own: its queue
 * bound, the deadline of waiting items and the one-by-one re-run of a failed batch.
 */

/** A `run` that holds each call until the test lets it go, and records what it was given. */
function gatedRun<I>() {
  const calls: I[][] = [];
  const releases: Array<() => void> = [];
  const run = async (items: I[]) => {
    calls.push(items);
    await new Promise<void>((resolve) => releases.push(resolve));
    return items;
  };
  return {
    run,
    calls,
    releaseAll() {
      for (const release of releases.splice(0)) release();
    },
  };
}

const turn = () => new Promise((resolve) => setImmediate(resolve));

async function until(check: () => boolean, what: string): Promise<void> {
  const deadline = Date.now() + 5000;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 2));
  }
}

describe("a micro-batch whose run is stalled", () => {
  it("given the waiting items at their bound, when one more arrives, then it is refused at once and never run", async () => {
    const gated = gatedRun<number>();
    const submit = microBatch(gated.run, {
      maxBatch: 10,
      maxInFlight: 1,
      retryOneByOne: () => true,
      maxWaiting: 3,
    });
    const inFlight = submit(0);
    await until(() => gated.calls.length === 1, "the first batch");

    const queued = [1, 2, 3].map((n) => submit(n));
    const refused = submit(4);
    await expect(refused).rejects.toBeInstanceOf(QueueRefusedError);
    await expect(refused).rejects.toMatchObject({ reason: "queue_full" });

    gated.releaseAll();
    expect(await inFlight).toBe(0);
    await until(() => gated.calls.length === 2, "the second batch");
    gated.releaseAll();
    expect(await Promise.all(queued)).toEqual([1, 2, 3]);
    expect(gated.calls).toEqual([[0], [1, 2, 3]]);
  });

  it("given items that waited past their deadline, when the stall ends, then they are dropped and only later ones run", async () => {
    const gated = gatedRun<string>();
    const submit = microBatch(gated.run, {
      maxBatch: 10,
      maxInFlight: 1,
      retryOneByOne: () => true,
      maxWaitMs: 50,
    });
    const inFlight = submit("in flight");
    await until(() => gated.calls.length === 1, "the first batch");
    const stale = [submit("stale 1"), submit("stale 2")];
    for (const item of stale) item.catch(() => {});
    await new Promise((resolve) => setTimeout(resolve, 80));
    const fresh = submit("fresh");

    gated.releaseAll();
    // An item already in flight when the deadline passed is not taken back: it may commit.
    expect(await inFlight).toBe("in flight");
    for (const item of stale) await expect(item).rejects.toMatchObject({ reason: "deadline_passed" });
    await until(() => gated.calls.length === 2, "the next batch");
    gated.releaseAll();
    expect(await fresh).toBe("fresh");
    expect(gated.calls).toEqual([["in flight"], ["fresh"]]);
  });

  it("given the bound reached by items past their deadline, when one more arrives, then the stale ones make room", async () => {
    const gated = gatedRun<string>();
    const submit = microBatch(gated.run, {
      maxBatch: 10,
      maxInFlight: 1,
      retryOneByOne: () => true,
      maxWaiting: 2,
      maxWaitMs: 30,
    });
    const inFlight = submit("in flight");
    await until(() => gated.calls.length === 1, "the first batch");
    const stale = [submit("stale 1"), submit("stale 2")];
    for (const item of stale) item.catch(() => {});
    await new Promise((resolve) => setTimeout(resolve, 50));

    const fresh = submit("fresh");
    // Refused at their deadline's first chance, without waiting for the stall to end.
    for (const item of stale) await expect(item).rejects.toMatchObject({ reason: "deadline_passed" });
    gated.releaseAll();
    await inFlight;
    await until(() => gated.calls.length === 2, "the next batch");
    gated.releaseAll();
    expect(await fresh).toBe("fresh");
  });
});

describe("a micro-batch whose batch fails", () => {
  it("given a batch of 50 retried one by one, then at most a few of the single runs are under way at once", async () => {
    let active = 0;
    let mostActive = 0;
    const submit = microBatch(
      async (items: number[]) => {
        if (items.length > 1) throw new Error("one bad item");
        active++;
        mostActive = Math.max(mostActive, active);
        await new Promise((resolve) => setTimeout(resolve, 2));
        active--;
        if (items[0] === 7) throw new Error("the bad item");
        return items;
      },
      { maxBatch: 100, maxInFlight: 1, retryOneByOne: () => true },
    );
    const results = await Promise.allSettled(Array.from({ length: 50 }, (_, i) => submit(i)));

    expect(results.filter((r) => r.status === "rejected")).toHaveLength(1);
    expect(results.filter((r) => r.status === "fulfilled")).toHaveLength(49);
    expect(mostActive).toBeGreaterThan(1);
    expect(mostActive).toBeLessThanOrEqual(4);
  });

  it("given the database going down during the one-by-one run, then the rest of the batch fail with it, unrun", async () => {
    const down = Object.assign(new Error("connect ECONNREFUSED"), { code: "ECONNREFUSED" });
    let singles = 0;
    const submit = microBatch(
      async (items: number[]) => {
        if (items.length > 1) throw new Error("one bad item");
        singles++;
        throw down;
      },
      { maxBatch: 100, maxInFlight: 1, retryOneByOne: (error) => error !== down },
    );
    const results = await Promise.allSettled(Array.from({ length: 50 }, (_, i) => submit(i)));

    expect(results.every((r) => r.status === "rejected" && r.reason === down)).toBe(true);
    expect(singles).toBeLessThanOrEqual(4);
  });

  it("given a failed batch whose items waited past their deadline, then they are not run again one by one", async () => {
    let fail: (error: Error) => void = () => {};
    const singles: number[] = [];
    const submit = microBatch(
      async (items: number[]) => {
        if (items.length > 1) await new Promise((_, reject) => (fail = reject));
        singles.push(...items);
        return items;
      },
      { maxBatch: 10, maxInFlight: 1, retryOneByOne: () => true, maxWaitMs: 30 },
    );
    const items = [submit(1), submit(2), submit(3)];
    for (const item of items) item.catch(() => {});
    await turn();
    await new Promise((resolve) => setTimeout(resolve, 50));
    fail(new Error("a statement that stalled, then failed"));

    for (const item of items) await expect(item).rejects.toMatchObject({ reason: "deadline_passed" });
    expect(singles).toEqual([]);
  });
});
