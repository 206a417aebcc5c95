import { randomUUID } from "node:crypto";
import { Redis } from "ioredis";
import type postgres from "postgres";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { createDatabase } from "../../../db/client.js";
import { createDeliveryQueue } from "../../../src/store/delivery-queue.js";
import { relayOutboxOnce } from "../../../workers/outbox-relay.js";
import { takeInTurns } from "../../../workers/relay-turns.js";
import { releaseDueSends } from "../../../workers/scheduled-sends.js";
import { silentLogger } from "../../support/harness.js";
import { createOwnDatabase } from "../../support/own-database.js";
import { scansAcross, scansDuring } from "../../support/table-scans.js";

/**
 * The tables the workers use as queues are read through their indexes however their size has
 * changed since a statement was first run. The delivery outbox swings from empty to tens of
 * thousands of rows in seconds, the scheduled sends from none to millions: plans Postgres made and
 * kept while a table was empty (a sequential scan and a sort, or the relay index read whole and
 * filtered) read every row of the table at every call once it had filled (the relay's turns: every
 * row of the tier for each organization of a pass, 3.5 ms a pass instead of 0.1 in the webhooks
 * benchmark, in whichever run such a plan happened to be kept; the scheduled sends' look, every
 * send scheduled for later at each poll, five times a second), until autovacuum's next analyze. In a database of this file's own,
 * with the tables' statistics those of empty tables (a vacuum while they were empty, autovacuum
 * off), as a fresh or idle service has them, and one connection, whose statements and their kept
 * plans are its own.
 */

const MEDIUM = 3;
const CRITICAL = 1;
const prefix = `{plans-${randomUUID().slice(0, 8)}}`;
const TABLES = ["delivery_outbox", "scheduled_deliveries"];

let dropOwnDatabase: () => Promise<void> = async () => {};
let sql: postgres.Sql;
const redis = new Redis(process.env.REDIS_URL ?? "redis://127.0.0.1:6379", { maxRetriesPerRequest: null });
const queue = createDeliveryQueue(redis, prefix);

/** One pass of the relay's main lane (fair: a shard holds at most 500 waiting) or of its critical lane. */
const relayPass = (lane: "main" | "critical") =>
  relayOutboxOnce({
    sql,
    queue,
    logger: silentLogger,
    waitingLimit: 500,
    ...(lane === "critical" && { maxPriority: CRITICAL, batchSize: 50 }),
  });

/** Outbox rows of `organizations`, `each` apiece. */
const backlog = (organizations: readonly string[], each: number, priority = MEDIUM) => sql`
  insert into delivery_outbox (message_id, queue_prefix, priority, organization_id)
  select gen_random_uuid(), ${prefix}, ${priority}, o
  from unnest(${organizations}::uuid[]) o cross join generate_series(1, ${each})`;

/** `count` sends scheduled at now + `offset` (an interval). */
const scheduled = (count: number, offset: string) => sql`
  insert into scheduled_deliveries (message_id, queue_prefix, priority, organization_id, due_at)
  select gen_random_uuid(), ${prefix}, ${MEDIUM}, gen_random_uuid(), now() + ${offset}::interval
  from generate_series(1, ${count})`;

/** One poll of the scheduled sends: what is due moves to the outbox. */
const releaseDue = () => releaseDueSends(sql, { queuePrefix: prefix, now: new Date(), batchSize: 500 });

/** One pass's take, in a transaction as the relay runs it. */
const pass = (tx: postgres.Sql, budget: number) =>
  takeInTurns(tx as unknown as postgres.TransactionSql, {
    prefix,
    maxPriority: 4,
    budget,
    cursor: new Map(),
  });

beforeAll(async () => {
  const own = await createOwnDatabase("queue_table_plans");
  dropOwnDatabase = own.drop;
  // One connection: the statements it prepares, and the plans Postgres keeps for them, are its own.
  sql = createDatabase({ url: own.url, poolSize: 1 }).sql;
  for (const table of TABLES) await sql`alter table ${sql(table)} set (autovacuum_enabled = off)`;
});

// Before each test, the tables empty and vacuumed (statistics of empty tables, no dead entries),
// and then an idle service's passes and polls, so that what Postgres keeps is made there: a vacuum
// makes it plan again, so this is done again for every test, after the last one's vacuum.
beforeEach(async () => {
  for (const table of TABLES) {
    await sql`delete from ${sql(table)}`;
    await sql`vacuum analyze ${sql(table)}`;
  }
  await queue.obliterate({ force: true });
  // Empty tables, then a message now and then.
  for (let i = 0; i < 10; i++) {
    await sql.begin((tx) => pass(tx as unknown as postgres.Sql, 100));
    await relayPass("main");
    await relayPass("critical");
    expect(await releaseDue()).toBe(0);
  }
  for (let i = 0; i < 10; i++) {
    await backlog([randomUUID()], 1);
    await backlog([randomUUID()], 1, CRITICAL);
    await sql.begin((tx) => pass(tx as unknown as postgres.Sql, 100));
    await sql`delete from delivery_outbox`;
    await backlog([randomUUID()], 1);
    await backlog([randomUUID()], 1, CRITICAL);
    expect(await relayPass("critical")).toBe(1);
    expect(await relayPass("main")).toBe(1);
    await scheduled(1, "-1 second");
    expect(await releaseDue()).toBe(1);
    await sql`delete from delivery_outbox`;
  }
  await queue.obliterate({ force: true });
});

afterAll(async () => {
  await queue.obliterate({ force: true });
  await queue.close();
  redis.disconnect();
  await sql?.end();
  await dropOwnDatabase();
});

describe("the relay on an outbox that grew since its statements were first run", () => {
  it("probes each organization's rows by the turns index, not the tier's every row", async () => {
    // A backlog: 40 organizations with 2,000 waiting rows each.
    await backlog(
      Array.from({ length: 40 }, () => randomUUID()),
      2000,
    );
    let taken = 0;
    const scans = await scansDuring(sql, "delivery_outbox", async (tx) => {
      taken = (await pass(tx, 80)).length;
    });
    expect(taken).toBe(80);
    expect(scans.seq_scan).toBe(0);
    // One entry a probe for the turns, and each organization's share (2) and the one after it: a
    // plan that read the tier whole for each organization reads 40 × 80,000.
    expect(scans.idx_tup_read).toBeLessThan(1000);
  });

  it("relays a pass of each lane, and deletes what it relayed, by the indexes", async () => {
    await backlog(
      Array.from({ length: 40 }, () => randomUUID()),
      2000,
    );
    // The critical lane with nothing of its own waiting: one look that finds nothing (through the
    // entries of the warm-up's critical rows, deleted and not yet vacuumed: 20), not the backlog.
    let relayed = -1;
    let scans = await scansAcross(sql, "delivery_outbox", async () => {
      relayed = await relayPass("critical");
    });
    expect(relayed).toBe(0);
    expect(scans.seq_scan).toBe(0);
    expect(scans.idx_tup_read).toBeLessThan(50);
    // And with five OTPs: they, and their five keys for the delete.
    await backlog([randomUUID()], 5, CRITICAL);
    scans = await scansAcross(sql, "delivery_outbox", async () => {
      relayed = await relayPass("critical");
    });
    expect(relayed).toBe(5);
    expect(scans.seq_scan).toBe(0);
    expect(scans.idx_tup_read).toBeLessThan(50);
    // The main lane: its look, its turns (a share of 5 each), and the 200 keys of its delete.
    scans = await scansAcross(sql, "delivery_outbox", async () => {
      relayed = await relayPass("main");
    });
    expect(relayed).toBe(200);
    expect(scans.seq_scan).toBe(0);
    expect(scans.idx_tup_read).toBeLessThan(1000);
  });
});

describe("the scheduled sends on a table that filled since their statements were first run", () => {
  it("looks for what is due, and moves it, by the due index, not every send scheduled for later", async () => {
    // 50,000 sends scheduled for next week.
    await scheduled(50_000, "7 days");
    // A poll with nothing due: one probe that finds nothing (the warm-up's ten rows, deleted and
    // not yet vacuumed, on the way), not the 50,000.
    let moved = -1;
    let scans = await scansAcross(sql, "scheduled_deliveries", async () => {
      moved = await releaseDue();
    });
    expect(moved).toBe(0);
    expect(scans.seq_scan).toBe(0);
    expect(scans.idx_tup_read).toBeLessThan(50);
    // Five due: the look, the five, and their keys for the delete.
    await scheduled(5, "-1 second");
    scans = await scansAcross(sql, "scheduled_deliveries", async () => {
      moved = await releaseDue();
    });
    expect(moved).toBe(5);
    expect(scans.seq_scan).toBe(0);
    expect(scans.idx_tup_read).toBeLessThan(100);
  });
});
