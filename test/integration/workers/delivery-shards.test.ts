import { randomUUID } from "node:crypto";
import { Queue } from "bullmq";
import type { Redis } from "ioredis";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import {
  type DeliveryJobData,
  DeliveryQueues,
  deliveryJobOptions,
  deliveryQueueName,
  LEGACY_DELIVERY_QUEUE,
  MAX_QUEUE_SHARDS,
} from "../../../src/store/delivery-queue.js";
import { unconsumedShards } from "../../../workers/shard-watch.js";
import { moveStrayJobs } from "../../../workers/stray-jobs.js";
import { sweep } from "../../../workers/sweeper.js";
import { createHarness, eventually, type Harness, onboard, sendSms } from "../../support/harness.js";
import { createOwnDatabase } from "../../support/own-database.js";
import { beforeEachPipeline, throughClient } from "../../support/redis-interleave.js";

/**
 * Delivery queue shards (QUEUE_SHARDS, decision 0041) on the machine's Redis: the relay puts each
 * message's job on the shard of its id, workers take every shard, and changing the shard count
 * loses nothing already queued and queues nothing twice, even with processes of two counts (or
 * of the release before shards) running side by side: shard names never depend on the count, the
 * workers move the jobs of stray queues into the messages' shards, and the sweeper looks in every
 * queue before adding a job.
 */
const harnesses: Harness[] = [];
afterEach(async () => {
  for (const h of harnesses.splice(0).reverse()) await h.close();
});

// A database of this file's own: the sweeper looks at every unfinished message of its database,
// and the test files running alongside would add theirs to what it re-queues.
let own: Awaited<ReturnType<typeof createOwnDatabase>>;
beforeAll(async () => {
  own = await createOwnDatabase("shards");
});
afterAll(async () => {
  await own?.drop();
});

function harness(env: Record<string, string>): Harness {
  const h = createHarness({ DATABASE_URL: own.url, ...env });
  harnesses.push(h);
  return h;
}

async function sendMany(h: Harness, apiKey: string, count: number): Promise<string[]> {
  const ids: string[] = [];
  for (let i = 0; i < count; i++) {
    const response = await sendSms(h, apiKey, {
      payload: { to: i % 4 === 1 ? "+15005550501" : "+14155550100", body: `shard ${i}` },
      notification_type: i % 5 === 0 ? "OTP" : "NEWS_UPDATE",
    });
    expect(response.status).toBe(202);
    ids.push(((await response.json()) as { request_id: string }).request_id);
  }
  return ids;
}

async function relayAll(h: Harness): Promise<void> {
  await eventually(async () => ((await h.relayOutbox()) === 0 ? true : undefined), 10_000, "outbox empty");
}

/** Which shards hold a job of each message. */
async function shardsHolding(h: Harness, ids: string[]): Promise<Map<string, number[]>> {
  const holding = new Map<string, number[]>(ids.map((id) => [id, []]));
  for (const [shard, queue] of h.queues.all.entries()) {
    for (const id of ids) if (await queue.getJob(id)) holding.get(id)?.push(shard);
  }
  return holding;
}

async function expectAllFinalOnce(h: Harness, organizationId: string, ids: string[]): Promise<void> {
  const finals = await eventually(
    async () => {
      const rows = await h.sql<{ message_id: string; finals: number }[]>`
        select message_id, count(*) filter (where type in ('success', 'failed', 'rejected'))::int as finals
        from message_events where organization_id = ${organizationId} group by message_id`;
      const map = new Map(rows.map((row) => [row.message_id, row.finals]));
      return ids.every((id) => (map.get(id) ?? 0) >= 1) ? map : undefined;
    },
    20_000,
    "every message final",
  );
  expect(ids.filter((id) => finals.get(id) !== 1)).toEqual([]);
}

const later = () => new Date(Date.now() + 60_000);

describe("given QUEUE_SHARDS=3", () => {
  it("relays each message to the shard of its id, and workers deliver every shard", async () => {
    const h = harness({ QUEUE_SHARDS: "3" });
    expect(h.queues.all.map((q) => q.name)).toEqual([0, 1, 2].map((k) => deliveryQueueName(k)));
    const org = await onboard(h);
    const ids = await sendMany(h, org.apiKey, 30);
    await relayAll(h);
    const holding = await shardsHolding(h, ids);
    for (const id of ids) expect(holding.get(id)).toEqual([h.queues.all.indexOf(h.queues.forMessage(id))]);
    const perShard = [0, 1, 2].map((k) => ids.filter((id) => holding.get(id)?.[0] === k).length);
    expect(
      perShard.every((count) => count > 0),
      String(perShard),
    ).toBe(true);
    // Priority within a shard: its critical jobs carry BullMQ priority 1.
    const job = await h.queues.forMessage(ids[0] as string).getJob(ids[0] as string);
    expect(job?.opts.priority).toBe(1);

    h.startWorker();
    await expectAllFinalOnce(h, org.id, ids);
  });
});

describe("given queued messages when the shard count changes", () => {
  it("from 3 to 1: the worker moves the jobs of dropped shards to shard 0, once, and nothing is lost", async () => {
    const prefix = `shards-${randomUUID().slice(0, 8)}`;
    const before = harness({ QUEUE_PREFIX: prefix, QUEUE_SHARDS: "3" });
    const org = await onboard(before);
    const ids = await sendMany(before, org.apiKey, 30);
    await relayAll(before);
    const inShard0 = [...(await shardsHolding(before, ids)).values()].filter((s) => s[0] === 0).length;

    const after = harness({ QUEUE_PREFIX: prefix, QUEUE_SHARDS: "1" });
    // The sweeper sees the jobs of the dropped shards (stray queues): it adds none.
    expect(await sweep({ db: after.db, queue: after.queues, now: later, graceMs: 0 })).toBe(0);
    // The worker moves them into shard 0, once.
    expect(await moveStrayJobs(after.redis, after.queues, Date.now)).toBe(ids.length - inShard0);
    expect(await moveStrayJobs(after.redis, after.queues, Date.now)).toBe(0);
    expect(await sweep({ db: after.db, queue: after.queues, now: later, graceMs: 0 })).toBe(0);
    expect([...(await shardsHolding(before, ids)).values()].every((s) => s.length === 1)).toBe(true);
    expect([...(await shardsHolding(after, ids)).values()].every((s) => s.length === 1)).toBe(true);

    after.startWorker();
    await expectAllFinalOnce(after, org.id, ids);
  });

  it("from 1 to 3: jobs already queued stay in shard 0 (kept by name) and are delivered from it", async () => {
    const prefix = `shards-${randomUUID().slice(0, 8)}`;
    const before = harness({ QUEUE_PREFIX: prefix, QUEUE_SHARDS: "1" });
    const org = await onboard(before);
    const ids = await sendMany(before, org.apiKey, 30);
    await relayAll(before);

    const after = harness({ QUEUE_PREFIX: prefix, QUEUE_SHARDS: "3" });
    expect(await sweep({ db: after.db, queue: after.queues, now: later, graceMs: 0 })).toBe(0);
    const newer = await sendMany(after, org.apiKey, 15);
    after.startWorker();
    await expectAllFinalOnce(after, org.id, [...ids, ...newer]);
  });
});

/** Every delivery queue (legacy, any shard) holding a job of each message, by name, at one instant. */
async function queuesHolding(h: Harness, ids: string[]): Promise<Map<string, string[]>> {
  const prefix = h.config.QUEUE_PREFIX;
  const names = [
    LEGACY_DELIVERY_QUEUE,
    ...Array.from({ length: MAX_QUEUE_SHARDS }, (_, k) => deliveryQueueName(k)),
  ];
  const holding = new Map<string, string[]>(ids.map((id) => [id, []]));
  // One MULTI: every queue read at one instant (a job moving between two reads would be missed).
  const multi = h.redis.multi();
  for (const name of names) for (const id of ids) multi.exists(`${prefix}:${name}:${id}`);
  const results = (await multi.exec()) ?? [];
  names.forEach((name, n) => {
    ids.forEach((id, index) => {
      if (results[n * ids.length + index]?.[1] === 1) holding.get(id)?.push(name);
    });
  });
  return holding;
}

/** What a worker process does every SWEEP_INTERVAL_MS, here every 20 ms until stopped. */
function sweepLoop(h: Harness): { stop: () => Promise<void> } {
  let running = true;
  const done = (async () => {
    while (running) {
      await moveStrayJobs(h.redis, h.queues, Date.now);
      await sweep({ db: h.db, queue: h.queues, now: () => new Date(), graceMs: 0 });
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  })();
  return {
    stop: async () => {
      running = false;
      await done;
    },
  };
}

async function interruptedAttempts(h: Harness, organizationId: string): Promise<number> {
  const [row] = await h.sql<{ count: number }[]>`
    select count(*)::int as count from message_events e
    where e.organization_id = ${organizationId} and to_jsonb(e)::text like '%attempt_interrupted%'`;
  return row?.count ?? 0;
}

describe("given processes of two shard counts side by side (a rolling change of QUEUE_SHARDS)", () => {
  it("gives no message two jobs: workers, relays and sweepers of 3 and 4 shards at once, retries under way", async () => {
    const prefix = `shards-${randomUUID().slice(0, 8)}`;
    // Retries 300 ms and more apart: delayed jobs wait while both sweepers look for them.
    const env = { QUEUE_PREFIX: prefix, RETRY_BASE_DELAY_MS: "300" };
    const three = harness({ ...env, QUEUE_SHARDS: "3" });
    const four = harness({ ...env, QUEUE_SHARDS: "4" });
    const org = await onboard(three);
    const loops = [sweepLoop(three), sweepLoop(four)];
    three.startWorker();
    four.startWorker();
    const doubled = new Set<string>();
    const ids: string[] = [];
    // Looks for a message with jobs in two queues all along.
    let watching = true;
    const watcher = (async () => {
      while (watching) {
        for (const [id, names] of await queuesHolding(three, [...ids])) if (names.length > 1) doubled.add(id);
        await new Promise((resolve) => setTimeout(resolve, 5));
      }
    })();
    try {
      for (let round = 0; round < 4; round++) {
        ids.push(...(await sendMany(round % 2 ? four : three, org.apiKey, 15)));
      }
      await eventually(
        async () => {
          const [row] = await three.sql<{ open: number }[]>`
            select count(*)::int as open from messages
            where organization_id = ${org.id} and status in ('accepted', 'pending')`;
          return row?.open === 0 ? true : undefined;
        },
        30_000,
        "every message final",
      );
    } finally {
      watching = false;
      await watcher;
      await Promise.all(loops.map((loop) => loop.stop()));
    }
    expect([...doubled]).toEqual([]);
    expect(await interruptedAttempts(three, org.id)).toBe(0);
    await expectAllFinalOnce(three, org.id, ids);
  }, 60_000);
});

/**
 * Processes of 3 and of 4 shards on one prefix, and `count` messages relayed by the first whose
 * jobs Redis then lost (no job, no outbox row: what the sweepers re-add).
 */
async function lostJobsOfThreeAndFour(count: number) {
  const prefix = `shards-${randomUUID().slice(0, 8)}`;
  const three = harness({ QUEUE_PREFIX: prefix, QUEUE_SHARDS: "3" });
  const four = harness({ QUEUE_PREFIX: prefix, QUEUE_SHARDS: "4" });
  const org = await onboard(three);
  const ids = await sendMany(three, org.apiKey, count);
  await relayAll(three);
  for (const id of ids) await (await three.queues.forMessage(id).getJob(id))?.remove();
  return { three, four, org, ids };
}

describe("given movers and sweepers of two shard counts at the same messages at once", () => {
  it("two movers of the untagged queue's jobs: each message ends with one job", async () => {
    const prefix = `shards-${randomUUID().slice(0, 8)}`;
    const three = harness({ QUEUE_PREFIX: prefix, QUEUE_SHARDS: "3" });
    const two = harness({ QUEUE_PREFIX: prefix, QUEUE_SHARDS: "2" });
    const org = await onboard(three);
    const ids = await sendMany(three, org.apiKey, 30);
    await relayAll(three);
    // As the release before shards had queued them.
    const legacy = new Queue<DeliveryJobData>(LEGACY_DELIVERY_QUEUE, { connection: three.redis, prefix });
    for (const id of ids) {
      const job = await three.queues.forMessage(id).getJob(id);
      await job?.remove();
      await legacy.add("deliver", { messageId: id }, deliveryJobOptions({ messageId: id, priority: 0 }));
    }
    // Both list every job, then move them one by one: without the job-change lock, the second to
    // reach a job removed nothing (BullMQ's remove of a job that is gone succeeds) and added it to
    // its own count's shard too.
    await Promise.all([
      moveStrayJobs(three.redis, three.queues, Date.now),
      moveStrayJobs(two.redis, two.queues, Date.now),
    ]);
    // One job each, in the message's shard for one of the two counts.
    const holding = await queuesHolding(three, ids);
    for (const id of ids)
      expect([[three.queues.forMessage(id).name], [two.queues.forMessage(id).name]], id).toContainEqual(
        holding.get(id),
      );
    await legacy.obliterate({ force: true });
    await legacy.close();
    three.startWorker();
    await expectAllFinalOnce(three, org.id, ids);
  });

  it("two sweepers of messages whose jobs Redis lost: each message gets one job", async () => {
    const { three, four, org, ids } = await lostJobsOfThreeAndFour(30);
    // Neither sweeper's first look goes out before both are about to look: both find no job, and
    // without the lock each would add one, to its own count's shard.
    let arrived = 0;
    let release = () => {};
    const bothLooking = new Promise<void>((resolve) => {
      release = resolve;
    });
    const added = await Promise.all(
      [three, four].map(async (h) => {
        let first = true;
        const client = beforeEachPipeline((await h.queues.first.client) as unknown as Redis, async () => {
          if (!first) return;
          first = false;
          if (++arrived === 2) release();
          await bothLooking;
        });
        const [shard0, ...rest] = h.queues.all;
        const queue = new DeliveryQueues([throughClient(shard0 as Queue<DeliveryJobData>, client), ...rest]);
        return sweep({ db: h.db, queue, now: later, graceMs: 0 });
      }),
    );
    expect(added.reduce((sum, count) => sum + count, 0)).toBe(ids.length);
    const holding = await queuesHolding(three, ids);
    for (const id of ids)
      expect([[three.queues.forMessage(id).name], [four.queues.forMessage(id).name]], id).toContainEqual(
        holding.get(id),
      );
    three.startWorker();
    four.startWorker();
    await expectAllFinalOnce(three, org.id, ids);
  });
  it("a sweeper whose look began before another count's sweeper put a job in a shard new to it: no second job", async () => {
    const { three, four, org, ids } = await lostJobsOfThreeAndFour(16);
    const inShard3 = ids.filter((id) => four.queues.forMessage(id).name === deliveryQueueName(3));
    expect(inShard3.length).toBeGreaterThan(0);
    // The count-3 sweeper has listed its queues (shard 3 has never held a job: not among them);
    // before its look, the count-4 sweeper adds every job, some in shard 3, and lets go its locks.
    let other: Promise<number> | undefined;
    const hooked = beforeEachPipeline((await three.queues.first.client) as unknown as Redis, async () => {
      other ??= sweep({ db: four.db, queue: four.queues, now: later, graceMs: 0 });
      await other;
    });
    const [first, ...rest] = three.queues.all;
    const looking = new DeliveryQueues([throughClient(first as Queue<DeliveryJobData>, hooked), ...rest]);
    expect(await sweep({ db: three.db, queue: looking, now: later, graceMs: 0 })).toBe(0);
    expect(await other).toBe(ids.length);
    const holding = await queuesHolding(three, ids);
    for (const id of ids) expect(holding.get(id), id).toEqual([four.queues.forMessage(id).name]);
    three.startWorker();
    four.startWorker();
    await expectAllFinalOnce(three, org.id, ids);
  });
});

describe("given jobs in the untagged queue of the release before shards (an upgrade)", () => {
  it("moves them into their shards keeping priority, due time and data, adds none again, delivers each once", async () => {
    const prefix = `shards-${randomUUID().slice(0, 8)}`;
    const old = harness({ QUEUE_PREFIX: prefix, QUEUE_SHARDS: "3" });
    const org = await onboard(old);
    const ids = await sendMany(old, org.apiKey, 12);
    await relayAll(old);
    // As the old release had queued them: the same jobs in `deliveries`, one delayed by a minute
    // (and holding a throughput turn, decision 0048, as a job handed back to its turn does).
    const legacy = new Queue<DeliveryJobData>(LEGACY_DELIVERY_QUEUE, { connection: old.redis, prefix });
    const turn = { key: "sms-sender:test", turn: 42 };
    for (const [index, id] of ids.entries()) {
      const job = await old.queues.forMessage(id).getJob(id);
      await job?.remove();
      await legacy.add(
        "deliver",
        index === 0 ? { messageId: id, throughput: turn } : { messageId: id },
        deliveryJobOptions({
          messageId: id,
          priority: job?.opts.priority ?? 0,
          delayMs: index === 0 ? 60_000 : 0,
        }),
      );
    }
    const delayedId = ids[0] as string;

    const upgraded = harness({ QUEUE_PREFIX: prefix, QUEUE_SHARDS: "3" });
    expect(await sweep({ db: upgraded.db, queue: upgraded.queues, now: later, graceMs: 0 })).toBe(0);
    expect(await moveStrayJobs(upgraded.redis, upgraded.queues, Date.now)).toBe(ids.length);
    expect(await sweep({ db: upgraded.db, queue: upgraded.queues, now: later, graceMs: 0 })).toBe(0);
    const holding = await queuesHolding(upgraded, ids);
    for (const id of ids) expect(holding.get(id)).toEqual([upgraded.queues.forMessage(id).name]);
    const moved = await upgraded.queues.forMessage(delayedId).getJob(delayedId);
    expect(await moved?.getState()).toBe("delayed");
    expect(moved?.opts.priority).toBe(1);
    expect(moved?.data).toEqual({ messageId: delayedId, throughput: turn });
    await legacy.obliterate({ force: true });
    await legacy.close();

    upgraded.startWorker();
    await expectAllFinalOnce(
      upgraded,
      org.id,
      ids.filter((id) => id !== delayedId),
    );
  }, 40_000);
});

describe("given a shard that refuses its jobs (its master away) while the others take theirs", () => {
  it("relays the other shards' rows and keeps only the failing shard's in the outbox until it recovers", async () => {
    const h = harness({ QUEUE_SHARDS: "3" });
    const org = await onboard(h);
    const ids = await sendMany(h, org.apiKey, 30);
    // Shard 1's job counter holds a non-number: BullMQ's INCR on it fails, as a real Redis error.
    const broken = h.queues.all[1];
    await h.redis.set(`${h.config.QUEUE_PREFIX}:${broken?.name}:id`, "not-a-number");
    const onBroken = ids.filter((id) => h.queues.forMessage(id) === broken);
    expect(onBroken.length).toBeGreaterThan(0);

    expect(await h.relayOutbox()).toBe(ids.length - onBroken.length);
    const waiting = await h.sql<{ message_id: string }[]>`
      select message_id from delivery_outbox where queue_prefix = ${h.config.QUEUE_PREFIX}`;
    expect(waiting.map((row) => row.message_id).sort()).toEqual([...onBroken].sort());
    // Nothing moved at all: the pass fails (and the relay loop backs off).
    await expect(h.relayOutbox()).rejects.toThrow();

    await h.redis.del(`${h.config.QUEUE_PREFIX}:${broken?.name}:id`);
    expect(await h.relayOutbox()).toBe(onBroken.length);
    h.startWorker();
    await expectAllFinalOnce(h, org.id, ids);
  });
});

describe("given a shard with jobs that no worker consumes (QUEUE_SHARDS_CONSUMED leaves it out)", () => {
  it("names that shard, with its jobs, and /metrics shows it has no worker", async () => {
    const h = harness({ QUEUE_SHARDS: "3", QUEUE_SHARDS_CONSUMED: "0,2" });
    const org = await onboard(h);
    h.startWorker();
    const ids = await sendMany(h, org.apiKey, 30);
    const stuck = ids.filter((id) => h.queues.forMessage(id) === h.queues.all[1]);
    const found = await eventually(
      async () => {
        const shards = await unconsumedShards(h.queues);
        return shards[0]?.jobs === stuck.length ? shards : undefined;
      },
      10_000,
      "shard 1's jobs waiting",
    );
    expect(found).toEqual([{ shard: 1, queue: h.queues.all[1]?.name, jobs: stuck.length }]);
    const metrics = await (await h.app.request("/metrics")).text();
    const workersOf = (name: string | undefined) =>
      metrics
        .split("\n")
        .find((line) => line.startsWith(`notification_queue_workers{queue="${name}"`))
        ?.split(" ")
        .at(-1);
    expect(workersOf(h.queues.all[1]?.name)).toBe("0");
    expect(workersOf(h.queues.all[0]?.name)).toBe("1");
  });
});
