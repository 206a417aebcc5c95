import { randomUUID } from "node:crypto";
import postgres from "postgres";
import { v7 as uuidv7 } from "uuid";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  LOAD_FOR_DELIVERY,
  PARTITION_READY_RECHECK_MS,
  rowsFromPartitions,
} from "../../../workers/delivery-store.js";
import { eventsPartitionOf } from "../../../workers/message-partitions.js";
import { createOwnDatabase } from "../../support/own-database.js";
import { scansDuring } from "../../support/table-scans.js";
import { uuidv7At } from "../../support/uuidv7-sql.js";

/**
 * Postgres may keep one plan for the worker's load of a day's table (workers/delivery-store.ts,
 * decision 0042): its choice, per connection, after a few executions. That plan must read indexes
 * whatever the tables held when it was made: made on an empty table, a sequential scan looks
 * cheapest, and kept while the table grew it would read every row at every load. The loads here
 * run on connections that keep the first plan they make (`plan_cache_mode=force_generic_plan`),
 * the worst of what Postgres may choose. In a database of this file's own, whose tables are
 * analysed only where a test says so: autovacuum is off for the tables the tests grow (its
 * ANALYZE would throw a kept plan away and hide what the tests look for).
 */

const organizationId = randomUUID();
const ENTRIES = 20_000;

let dropOwnDatabase: () => Promise<void> = async () => {};
let admin: postgres.Sql;
let url = "";

beforeAll(async () => {
  const own = await createOwnDatabase("load_plans");
  dropOwnDatabase = own.drop;
  url = own.url;
  admin = postgres(url, { max: 1, onnotice: () => {} });
  await admin`insert into organizations (id, product_id, name, active) values (${organizationId}, 'p', 'Plan', true)`;
  await admin`alter table suppressions set (autovacuum_enabled = off)`;
});

afterAll(async () => {
  await admin?.end();
  await dropOwnDatabase();
});

/** A connection that keeps the first plan of each statement, telling `sent` of each statement. */
const loadConnection = (sent: string[] = []) =>
  postgres(url, {
    max: 1,
    onnotice: () => {},
    connection: { plan_cache_mode: "force_generic_plan" },
    debug: (_connection, query) => sent.push(query),
  });

/** A coming day's partition, made ahead by the worker and still empty, as at midnight. */
async function comingDay(daysAhead: number) {
  const day = Date.now() + daysAhead * 86_400_000;
  const table = eventsPartitionOf(uuidv7({ msecs: day })) as string;
  await admin.unsafe(`alter table ${table} set (autovacuum_enabled = off)`);
  /**
   * `count` accepted messages of the day, each with its recipients' blind indexes: an SMS's one
   * (`recipient-<n>`), or an e-mail's three (`to-<n>`, `cc-<n>`, `bcc-<n>`).
   */
  const addEvents = (count: number, channel: "sms" | "email" = "sms") =>
    admin.unsafe(
      `insert into message_events
         (message_id, organization_id, seq, type, retry_count, data, occurred_at, recipient_keys)
       select ${uuidv7At(`to_timestamp(${day / 1000}) + g * interval '1 ms'`)}, $1, 1, 'accepted', 0,
         json_build_object('channel', $2::text), now(),
         ${channel === "sms" ? "array['recipient-' || g]" : "array['to-' || g, 'cc-' || g, 'bcc-' || g]"}
       from generate_series(1, ${count}) g`,
      [organizationId, channel],
    );
  const someIds = async (count: number) =>
    (
      await admin<
        Array<{ id: string }>
      >`select message_id as id from ${admin(table)} order by random() limit ${count}`
    ).map((row) => row.id);
  /** Whether autovacuum's ANALYZE ran on the table anyway (the test would then prove nothing). */
  const autoAnalysed = async () => {
    const [row] = await admin<Array<{ analysed: boolean }>>`
      select last_autoanalyze is not null as analysed from pg_stat_user_tables where relname = ${table}`;
    return row?.analysed ?? false;
  };
  return { day, table, addEvents, someIds, autoAnalysed };
}

/** Loads of one id, then of ten, through `sql`'s one connection, as `load` makes them. */
async function loadsOn(
  { someIds }: Awaited<ReturnType<typeof comingDay>>,
  tx: postgres.Sql,
  load: (tx: postgres.Sql) => (ids: string[]) => Promise<unknown[]>,
) {
  const ids = await someIds(30);
  const inTransaction = load(tx);
  for (const id of ids.slice(0, 20)) expect(await inTransaction([id])).toHaveLength(1);
  expect(await inTransaction(ids.slice(20))).toHaveLength(10);
}

describe("the load of a day's table", () => {
  it("would, read by name while the table is empty, keep a plan that scans the whole table at every load", async () => {
    // Why the load waits for the statistics: the statement on the partition, first run while it is empty.
    const coming = await comingDay(2);
    const statement = LOAD_FOR_DELIVERY.replace("from message_events e", `from ${coming.table} e`);
    const sql = loadConnection();
    try {
      expect(await sql.unsafe(statement, [[uuidv7({ msecs: coming.day })]], { prepare: true })).toEqual([]);
      await coming.addEvents(ENTRIES);
      const scans = await scansDuring(sql, coming.table, (tx) =>
        loadsOn(coming, tx, (tx) => (ids) => tx.unsafe(statement, [ids], { prepare: true }) as never),
      );
      expect(scans.seq_scan).toBe(21);
      expect(await coming.autoAnalysed()).toBe(false);
    } finally {
      await sql.end();
    }
  });

  it("reads a young day through the parent, and the day's table by name once its statistics count enough rows: with the primary key's plan as it grows, and the suppression list's unique index made while the list was empty", async () => {
    const coming = await comingDay(1);
    const { day, table } = coming;
    const sent: string[] = [];
    const loads = loadConnection(sent);
    const reads = () =>
      sent
        .splice(0)
        .filter((text) => text.includes("organization_active"))
        .map((text) => /from (\S+) e\b/.exec(text)?.[1]);
    try {
      let clock = Date.now();
      const load = rowsFromPartitions(loads, () => clock);
      // Empty, then young and never analysed: the parent.
      expect(await load([uuidv7({ msecs: day })])).toEqual([]);
      await coming.addEvents(1_000);
      const [young] = await coming.someIds(1);
      expect(await load([young as string])).toHaveLength(1);
      expect(reads()).toEqual(["message_events", "message_events"]);
      // Analysed with 1,000 rows (autovacuum's ANALYZE would come at 50 and at every tenth more):
      // by name from the next question about it on, 5 s later. Its plan is made now, with the
      // suppression list still empty.
      await admin.unsafe(`analyze ${table}`);
      expect(await load([young as string])).toHaveLength(1);
      clock += PARTITION_READY_RECHECK_MS + 1;
      expect(await load([young as string])).toHaveLength(1);
      expect(reads()).toEqual(["message_events", table]);
      // The table and the suppression list grow, no ANALYZE: the plan made before is kept.
      await coming.addEvents(ENTRIES);
      await admin`insert into suppressions (organization_id, channel, recipient_key, reason)
        select ${organizationId}, 'sms', 'other-' || g, 'manual' from generate_series(1, ${ENTRIES}) g`;
      const onTable = await scansDuring(loads, table, (tx) =>
        loadsOn(coming, tx, (tx) => rowsFromPartitions(tx, () => clock)),
      );
      expect(onTable.seq_scan).toBe(0);
      expect(onTable.idx_scan).toBeGreaterThanOrEqual(21);
      const onList = await scansDuring(loads, "suppressions", (tx) =>
        loadsOn(coming, tx, (tx) => rowsFromPartitions(tx, () => clock)),
      );
      expect(onList.seq_scan).toBe(0);
      expect(onList.idx_scan).toBeGreaterThanOrEqual(30);
      expect(onList.idx_tup_read).toBe(0);
      // The one plan made at 1,000 rows ran every load since.
      const [plan] = await loads<Array<{ generic_plans: number }>>`
        select generic_plans::int from pg_prepared_statements where statement like ${`%from ${table} e%`}`;
      expect(plan?.generic_plans).toBeGreaterThanOrEqual(40);
      expect(await coming.autoAnalysed()).toBe(false);
    } finally {
      await loads.end();
    }
  });

  it("forgets a ready day's table that retention dropped: the load reads the parent, and asks again at the next", async () => {
    const coming = await comingDay(3);
    await coming.addEvents(1_000);
    await admin.unsafe(`analyze ${coming.table}`);
    const [id] = await coming.someIds(1);
    const sent: string[] = [];
    const sql = loadConnection(sent);
    const asked = () =>
      sent.splice(0).map((text) => (text.includes("reltuples") ? "asked" : /from (\S+) e\b/.exec(text)?.[1]));
    try {
      const load = rowsFromPartitions(sql);
      expect(await load([id as string])).toHaveLength(1);
      expect(asked().filter(Boolean)).toEqual(["asked", coming.table]);
      await admin.unsafe(`drop table ${coming.table}`);
      expect(await load([id as string])).toEqual([]);
      expect(asked().filter(Boolean)).toEqual([coming.table, "message_events"]);
      expect(await load([id as string])).toEqual([]);
      expect(asked().filter(Boolean)).toEqual(["asked", "message_events"]);
    } finally {
      await sql.end();
    }
  });
});

describe("the load's check of the suppression list", () => {
  it("flags an accepted message one of whose recipients, its first or another, is on its organization's list for its channel, and no other", async () => {
    const otherOrganization = randomUUID();
    await admin`insert into organizations (id, product_id, name, active) values (${otherOrganization}, 'p', 'Other', true)`;
    await admin`insert into suppressions (organization_id, channel, recipient_key, reason) values
      (${organizationId}, 'sms', 'check-sms-listed', 'manual'),
      (${organizationId}, 'email', 'check-first-listed', 'hard_bounce'),
      (${organizationId}, 'email', 'check-third-listed', 'complaint'),
      (${organizationId}, 'email', 'check-listed-for-email', 'manual'),
      (${otherOrganization}, 'sms', 'check-listed-elsewhere', 'manual')`;
    const cases: Array<{ name: string; channel: string; keys: string[] | null; suppressed: boolean | null }> =
      [
        { name: "an SMS to a listed number", channel: "sms", keys: ["check-sms-listed"], suppressed: true },
        { name: "an SMS to another number", channel: "sms", keys: ["check-sms-free"], suppressed: false },
        {
          name: "an e-mail whose first recipient is listed",
          channel: "email",
          keys: ["check-first-listed", "check-free-1"],
          suppressed: true,
        },
        {
          name: "an e-mail whose third recipient is listed",
          channel: "email",
          keys: ["check-free-1", "check-free-2", "check-third-listed"],
          suppressed: true,
        },
        {
          name: "an e-mail to none listed",
          channel: "email",
          keys: ["check-free-1", "check-free-2"],
          suppressed: false,
        },
        {
          name: "an SMS to a recipient listed for e-mail only",
          channel: "sms",
          keys: ["check-listed-for-email"],
          suppressed: false,
        },
        {
          name: "an SMS to a recipient another organization listed",
          channel: "sms",
          keys: ["check-listed-elsewhere"],
          suppressed: false,
        },
        { name: "a message from before the blind indexes", channel: "sms", keys: null, suppressed: null },
      ];
    const ids = cases.map(() => uuidv7());
    for (const [n, { channel, keys }] of cases.entries()) {
      await admin`insert into message_events
          (message_id, organization_id, seq, type, retry_count, data, occurred_at, recipient_keys)
        values (${ids[n] as string}, ${organizationId}, 1, 'accepted', 0, ${admin.json({ channel })}, now(), ${keys})`;
    }
    // A later event of the first message: only the accepted one carries the check.
    await admin`insert into message_events (message_id, organization_id, seq, type, retry_count, data, occurred_at)
      values (${ids[0] as string}, ${organizationId}, 2, 'pending', 0, '{}', now())`;
    const rows = await admin.unsafe<Array<{ message_id: string; seq: number; suppressed: boolean | null }>>(
      LOAD_FOR_DELIVERY,
      [ids],
    );
    const found = rows.map((row) => ({ id: row.message_id, seq: row.seq, suppressed: row.suppressed }));
    const expected = cases.map(({ suppressed }, n) => ({ id: ids[n], seq: 1, suppressed }));
    expected.splice(1, 0, { id: ids[0], seq: 2, suppressed: null });
    const byId = (a: { id?: string; seq: number }, b: { id?: string; seq: number }) =>
      (a.id as string).localeCompare(b.id as string) || a.seq - b.seq;
    expect(found.sort(byId)).toEqual(expected.sort(byId));
  });

  it("probes the list for an e-mail's other recipients too, in a plan made while the list had none of the channel's entries", async () => {
    const coming = await comingDay(4);
    await coming.addEvents(1_000, "email");
    await admin.unsafe(`analyze ${coming.table}`);
    await admin`delete from suppressions where channel = 'email'`;
    await admin`analyze suppressions`;
    const sql = loadConnection();
    try {
      // The plan is made now (the table ready at once: analysed with 1,000 rows), then kept.
      const load = rowsFromPartitions(sql);
      const [first] = await coming.someIds(1);
      expect(await load([first as string])).toHaveLength(1);
      await admin`insert into suppressions (organization_id, channel, recipient_key, reason)
        select ${organizationId}, 'email', 'other-' || g, 'hard_bounce' from generate_series(1, ${ENTRIES}) g`;
      const scans = await scansDuring(sql, "suppressions", (tx) =>
        loadsOn(coming, tx, (tx) => rowsFromPartitions(tx)),
      );
      expect(scans.seq_scan).toBe(0);
      // Both exists probed for each of the 30 messages: the first recipient, then the two others,
      // and found nothing, reading no entry (the organization's 20,000 for e-mail not scanned).
      expect(scans.idx_scan).toBeGreaterThanOrEqual(60);
      expect(scans.idx_tup_read).toBe(0);
      // And an e-mail whose third recipient is listed is found so, through the kept plan.
      const [listed] = await coming.someIds(1);
      const [keys] = await admin<Array<{ recipient_keys: string[] }>>`
        select recipient_keys from message_events where message_id = ${listed as string}`;
      await admin`insert into suppressions (organization_id, channel, recipient_key, reason)
        values (${organizationId}, 'email', ${keys?.recipient_keys[2] as string}, 'hard_bounce')`;
      const [row] = await load([listed as string]);
      expect(row?.suppressed).toBe(true);
      const [plan] = await sql<Array<{ generic_plans: number }>>`
        select generic_plans::int from pg_prepared_statements where statement like ${`%from ${coming.table} e%`}`;
      // One plan, made at the first load, ran all 23 (that one, the 21 counted, the last).
      expect(plan?.generic_plans).toBe(23);
      expect(await coming.autoAnalysed()).toBe(false);
    } finally {
      await sql.end();
    }
  });
});
