import { randomUUID } from "node:crypto";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { deliveryQueueName } from "../../../src/store/delivery-queue.js";
import { sweep } from "../../../workers/sweeper.js";
import { createHarness, eventually, type Harness, onboard, sendSms } from "../../support/harness.js";
import { createOwnDatabase } from "../../support/own-database.js";

/**
 * Delivery queue shards (QUEUE_SHARDS, decision 0041) on the machine's Redis: the relay puts each
 * message's job on the shard of its id, workers take every shard, and changing the shard count
 * loses nothing already queued and queues nothing twice (the sweeper looks in every shard of the
 * new count and adds what it misses to the message's new shard).
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
    expect(h.queues.all.map((q) => q.name)).toEqual([0, 1, 2].map((k) => deliveryQueueName(k, 3)));
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
  it("from 3 to 1: the sweeper moves the jobs of dropped shards to shard 0, once, and nothing is lost", async () => {
    const prefix = `shards-${randomUUID().slice(0, 8)}`;
    const before = harness({ QUEUE_PREFIX: prefix, QUEUE_SHARDS: "3" });
    const org = await onboard(before);
    const ids = await sendMany(before, org.apiKey, 30);
    await relayAll(before);
    const inShard0 = [...(await shardsHolding(before, ids)).values()].filter((s) => s[0] === 0).length;

    const after = harness({ QUEUE_PREFIX: prefix, QUEUE_SHARDS: "1" });
    const moved = await sweep({ db: after.db, queue: after.queues, now: later, graceMs: 0 });
    expect(moved).toBe(ids.length - inShard0);
    // A second sweep finds every message queued: nothing is added twice.
    expect(await sweep({ db: after.db, queue: after.queues, now: later, graceMs: 0 })).toBe(0);
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
