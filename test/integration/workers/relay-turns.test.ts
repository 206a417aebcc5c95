import { randomUUID } from "node:crypto";
import { v7 as uuidv7 } from "uuid";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import { relayOutboxOnce } from "../../../workers/outbox-relay.js";
import type { TurnCursor } from "../../../workers/relay-turns.js";
import { createHarness, silentLogger } from "../../support/harness.js";

// Fairness between organizations in the relay (issue 19, docs/decisions/0047): with a shard's
// waiting jobs capped, each tier's outbox rows leave in turns by organization. No worker runs:
// the tests run the relay's passes and read the queue. Outbox rows are written directly (the
// relay reads nothing else), thousands at a time.
const h = createHarness();
afterAll(() => h.close());
afterEach(async () => {
  await h.sql`delete from delivery_outbox where queue_prefix = ${h.config.QUEUE_PREFIX}`;
  await h.queue.obliterate({ force: true });
});

const MEDIUM = 3;
const CRITICAL = 1;

async function backlog(organizationId: string | null, count: number, priority = MEDIUM): Promise<string[]> {
  const ids = Array.from({ length: count }, () => uuidv7());
  await h.sql`
    insert into delivery_outbox (message_id, queue_prefix, priority, organization_id)
    select unnest(${ids}::uuid[]), ${h.config.QUEUE_PREFIX}, ${priority}, ${organizationId}::uuid`;
  return ids;
}

const pass = (waitingLimit: number, turns: TurnCursor = new Map(), batchSize = 200) =>
  relayOutboxOnce({ sql: h.sql, queue: h.queue, logger: silentLogger, batchSize, waitingLimit, turns });

async function queued(): Promise<Set<string>> {
  const jobs = await h.queue.getJobs(["wait", "prioritized"], 0, -1);
  return new Set(jobs.map((job) => job.data.messageId));
}

describe("the relay taking turns by organization", () => {
  it("relays another organization's few messages at the first pass, beside a backlog of thousands", async () => {
    const a = await backlog(randomUUID(), 5000);
    const b = await backlog(randomUUID(), 5);
    expect(await pass(100)).toBe(100);
    const inRedis = await queued();
    for (const id of b) expect(inRedis.has(id)).toBe(true);
    // A's oldest, in order: its share of the pass.
    expect(a.slice(0, 95).every((id) => inRedis.has(id))).toBe(true);
  });

  it("holds the rest in the outbox once the shard has its limit waiting, and adds again as room is made", async () => {
    await backlog(randomUUID(), 300);
    expect(await pass(100)).toBe(100);
    expect(await pass(100)).toBe(0);
    const [first] = await h.queue.getJobs(["prioritized", "wait"], 0, 9);
    await first?.remove();
    expect(await pass(100)).toBe(1);
  });

  it("never holds back the critical tier, and takes tiers in order", async () => {
    await backlog(randomUUID(), 150, 4);
    const otp = await backlog(randomUUID(), 3, CRITICAL);
    expect(await pass(100)).toBe(100);
    expect(await pass(100)).toBe(0);
    // The critical lane (maxPriority 1) is not capped.
    const lane = await relayOutboxOnce({
      sql: h.sql,
      queue: h.queue,
      logger: silentLogger,
      waitingLimit: 100,
      maxPriority: CRITICAL,
    });
    expect(lane).toBe(0); // the OTPs went first, in the first pass, before any low row
    const inRedis = await queued();
    for (const id of otp) expect(inRedis.has(id)).toBe(true);
    const more = await backlog(randomUUID(), 2, CRITICAL);
    expect(
      await relayOutboxOnce({
        sql: h.sql,
        queue: h.queue,
        logger: silentLogger,
        waitingLimit: 100,
        maxPriority: CRITICAL,
      }),
    ).toBe(2);
    for (const id of more) expect((await queued()).has(id)).toBe(true);
  });

  it("gives rows of a release before the organization was recorded a turn of their own", async () => {
    await backlog(randomUUID(), 1000);
    const legacy = await backlog(null, 3);
    expect(await pass(50)).toBe(50);
    const inRedis = await queued();
    for (const id of legacy) expect(inRedis.has(id)).toBe(true);
  });

  it("when the budget cuts a turn off, the organizations left out go first at the next pass", async () => {
    const organizations = Array.from({ length: 10 }, () => randomUUID()).sort();
    const firsts = await Promise.all(organizations.map(async (id) => (await backlog(id, 3))[0] as string));
    await backlog(null, 2);
    const turns: TurnCursor = new Map();
    // Room for 5: one row without an organization (they go first), and four organizations' oldest.
    expect(await pass(5, turns)).toBe(5);
    let inRedis = await queued();
    expect(firsts.filter((id) => inRedis.has(id))).toEqual(firsts.slice(0, 4));
    // Room for 5 more: the other row without one, and the next four organizations, not the first again.
    await h.queue.obliterate({ force: true });
    expect(await pass(5, turns)).toBe(5);
    inRedis = await queued();
    expect(firsts.filter((id) => inRedis.has(id))).toEqual(firsts.slice(4, 8));
    // And then the last two before the first ones' second rows.
    await h.queue.obliterate({ force: true });
    expect(await pass(2, turns)).toBe(2);
    inRedis = await queued();
    expect(firsts.filter((id) => inRedis.has(id))).toEqual(firsts.slice(8, 10));
  });

  it("with more organizations waiting than one pass visits, the next pass goes on from where it stopped", async () => {
    const organizations = Array.from({ length: 300 }, () => randomUUID());
    const firsts = await Promise.all(organizations.map(async (id) => (await backlog(id, 2))[0] as string));
    const turns: TurnCursor = new Map();
    expect(await pass(10_000, turns, 1000)).toBe(256 * 2); // 256 organizations a pass, a share of 4 each: their 2
    expect(await pass(10_000, turns, 1000)).toBe(44 * 2);
    const inRedis = await queued();
    for (const id of firsts) expect(inRedis.has(id)).toBe(true);
  });

  it("without a limit (0), moves rows in id order as fast as Redis takes them, as before", async () => {
    const a = await backlog(randomUUID(), 300);
    await backlog(randomUUID(), 5);
    expect(await pass(0)).toBe(200);
    const inRedis = await queued();
    expect(a.slice(0, 200).every((id) => inRedis.has(id))).toBe(true);
  });
});
