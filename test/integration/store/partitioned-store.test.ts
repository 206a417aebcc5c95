import { randomUUID } from "node:crypto";
import postgres from "postgres";
import { v7 as uuidv7 } from "uuid";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { dropDatabase, ensureDatabase } from "../../../db/migrate.js";
import { createDayTables, READY_PARTITION_ROWS } from "../../../src/store/day-partitions.js";
import { LOAD_EVENTS } from "../../../src/store/events.js";
import { FIND_RECORDS } from "../../../src/store/records.js";
import { claimDueDeliveries } from "../../../src/store/webhook-deliveries.js";
import {
  LOAD_FOR_DELIVERY,
  type LoadRow,
  PARTITION_READY_RECHECK_MS,
  rowsFromPartitions,
} from "../../../workers/delivery-store.js";
import { eventsPartitionOf } from "../../../workers/message-partitions.js";
import { migrateBefore, migrateWith } from "../../support/migrations.js";
import { uuidv7At } from "../../support/uuidv7-sql.js";

/**
 * `message_events` and `messages` partitioned by day on `message_id` (docs/decisions/0042): the
 * migration moves an existing database's rows without losing or changing one, and without
 * sending a webhook again; the append-only rules hold on every partition; an id is looked up in
 * one partition. In a database of this file's own, migrated in two steps.
 */

const DAY = 86_400_000;
const organizationId = randomUUID();
const now = Date.now();
/** Ids made at these instants: today, three days ago, 200 days ago, 30 days ahead, and a UUIDv4. */
const ids = {
  today: uuidv7({ msecs: now }),
  threeDaysAgo: uuidv7({ msecs: now - 3 * DAY }),
  longAgo: uuidv7({ msecs: now - 200 * DAY }),
  ahead: uuidv7({ msecs: now + 30 * DAY }),
  notV7: randomUUID(),
};
/** Filler messages of today, so the planner has a table worth an index. */
const FILLER = 3000;
/**
 * A long history: a message a day from 15 to 1014 days ago. A partition per day would hold ~23
 * locks each until the migration's end, past Postgres's lock table (64 × 100 by default: "out of
 * shared memory"): they go to one history partition instead.
 */
const HISTORY_DAYS = 1000;
const history = Array.from({ length: HISTORY_DAYS }, (_, day) => uuidv7({ msecs: now - (15 + day) * DAY }));
/** The day below which the migration puts every id into one history partition: 14 days ago. */
const historyDay = now - 14 * DAY;

let url = "";
let admin: postgres.Sql;

/** Every row of both tables, as JSON, in key order. */
async function snapshot() {
  const events = await admin<Array<{ row: Record<string, unknown> }>>`
    select to_jsonb(e) as row from message_events e order by message_id, seq`;
  const records = await admin<Array<{ row: Record<string, unknown> }>>`
    select to_jsonb(m) as row from messages m order by message_id`;
  return { events: events.map((r) => r.row), records: records.map((r) => r.row) };
}

/**
 * Messages of the given ids, each with three events (accepted, attempt started, success), sealed
 * content and a blind index (once the tables are partitioned, in their ids' day partitions:
 * docs/decisions/0042).
 */
async function addMessages(messageIds: string[]) {
  await admin`
    with made as (select unnest(${messageIds}::uuid[]) as id),
    events as (
      insert into message_events (message_id, organization_id, seq, type, retry_count, data, occurred_at,
        content_enc, recipient_keys)
      select id, ${organizationId}, s.seq, s.type, 0, jsonb_build_object('id', id) || s.data, now(),
        case when s.seq = 1 then '\\xdeadbeef'::bytea end,
        case when s.seq = 1 then array[md5(id::text)] end
      from made cross join (values
        (1, 'accepted', '{"channel":"sms","priority":"medium"}'::jsonb),
        (2, 'pending', '{"kind":"attempt_started","attempt":1}'::jsonb),
        (3, 'success', '{"attempt":1,"provider":"simulator","providerMessageId":"x"}'::jsonb)
      ) as s(seq, type, data)
    )
    insert into messages (message_id, organization_id, product_id, channel, status, priority,
      sender, retry_enabled, retry_count, version, created_at, updated_at, content_enc, recipient_keys,
      delivery_state, delivery_updated_at)
    select id, ${organizationId}, 'p', 'sms', 'success', 'medium', 'ACME', true, 0, 3, now(), now(),
      '\\xdeadbeef'::bytea, array[md5(id::text)], 'delivered', now()
    from made`;
}

/** Where each of the named messages' rows is: the partition of its event 1 and of its record. */
async function partitionsOf(messageIds: string[]) {
  const rows = await admin<Array<{ message_id: string; events: string; record: string }>>`
    select e.message_id, e.tableoid::regclass::text as events, m.tableoid::regclass::text as record
    from message_events e join messages m using (message_id)
    where e.message_id = any(${messageIds}::uuid[]) and e.seq = 1`;
  return new Map(rows.map((row) => [row.message_id, { events: row.events, record: row.record }]));
}

const dayOf = (ms: number) => new Date(ms).toISOString().slice(0, 10).replaceAll("-", "");

let before: Awaited<ReturnType<typeof snapshot>>;
let deliveriesBefore = 0;
let positionBefore = 0;

beforeAll(async () => {
  const base = new URL(inject("databaseUrl"));
  base.pathname = `/${base.pathname.slice(1)}_partitions_${randomUUID().slice(0, 8)}`;
  url = base.toString();
  await ensureDatabase(url);
  await migrateBefore(url, "_partitioned-store");
  admin = postgres(url, { max: 1, onnotice: () => {} });

  // A database in use: an organization with a webhook endpoint (the fan-out trigger of migration
  // 0012 queues a delivery per accepted event), messages of several days with three events each,
  // sealed content and blind indexes, and filler.
  await admin`insert into organizations (id, product_id, name, active) values (${organizationId}, 'p', 'Partitions', true)`;
  await admin`
    insert into webhook_endpoints (id, organization_id, url, event_types, enabled, secret_sealed, created_at, updated_at)
    values (${randomUUID()}, ${organizationId}, 'https://hooks.example.com/', array['message.accepted'], true, '\\x00', now(), now())`;
  const filler = Array.from({ length: FILLER }, () => uuidv7());
  await addMessages([...Object.values(ids), ...history, ...filler]);
  before = await snapshot();
  const [deliveries] = await admin<
    Array<{ count: number }>
  >`select count(*)::int as count from webhook_deliveries`;
  deliveriesBefore = deliveries?.count ?? 0;
  const [position] = await admin<
    Array<{ max: number }>
  >`select max(position)::int as max from message_events`;
  positionBefore = position?.max ?? 0;

  await migrateWith(url);
}, 60_000);

afterAll(async () => {
  await admin?.end();
  await dropDatabase(url);
});

describe("the migration to partitioned tables", () => {
  it("moves every row of both tables, unchanged", async () => {
    expect(before.events).toHaveLength(3 * (FILLER + HISTORY_DAYS + 5));
    expect(before.records).toHaveLength(FILLER + HISTORY_DAYS + 5);
    const after = await snapshot();
    expect(after.events).toEqual(before.events);
    // Compared on the columns the records had before: later migrations add some (0019's, 0020's).
    const columns = Object.keys(before.records[0] ?? {});
    const asBefore = after.records.map((record) =>
      Object.fromEntries(columns.map((column) => [column, record[column as keyof typeof record]])),
    );
    expect(asBefore).toEqual(before.records);
  });

  it("puts each recent message in its day's partition, older ones in one history partition, others in the default one", async () => {
    const where = await partitionsOf(Object.values(ids));
    expect(where.get(ids.today)).toEqual({
      events: `message_events_p${dayOf(now)}`,
      record: `messages_p${dayOf(now)}`,
    });
    expect(where.get(ids.threeDaysAgo)?.events).toBe(`message_events_p${dayOf(now - 3 * DAY)}`);
    expect(where.get(ids.longAgo)).toEqual({
      events: `message_events_before_${dayOf(historyDay)}`,
      record: `messages_before_${dayOf(historyDay)}`,
    });
    // Further ahead than the coming week: the default partition, until the worker makes its day.
    expect(where.get(ids.ahead)).toEqual({ events: "message_events_default", record: "messages_default" });
    // Routing is by value: a UUIDv4 goes where its first 48 bits point, nearly always no day made.
    expect(where.get(ids.notV7)?.record).toMatch(/^messages_(default|before_\d{8})$/);
    // The long history: one partition per table, not one per day.
    const [counts] = await admin<Array<{ history: number; days: number }>>`
      select count(*) filter (where m.tableoid::regclass::text = ${`messages_before_${dayOf(historyDay)}`})::int as history,
        (select count(*)::int from pg_inherits where inhparent = 'messages'::regclass) as days
      from messages m where m.message_id = any(${history}::uuid[])`;
    expect(counts?.history).toBe(HISTORY_DAYS);
    expect(counts?.days).toBeLessThanOrEqual(2 + 15 + 8); // default, history, the last 14 days and today, the coming week
    // And the coming week's partitions are there before any message needs them.
    const [next] = await admin<Array<{ exists: boolean }>>`
      select to_regclass(${`messages_p${dayOf(now + 7 * DAY)}`}) is not null as exists`;
    expect(next?.exists).toBe(true);
  });

  it("sends no webhook again, and an event appended afterwards is fanned out as before", async () => {
    const count = async () =>
      (await admin<Array<{ count: number }>>`select count(*)::int as count from webhook_deliveries`)[0]
        ?.count;
    expect(deliveriesBefore).toBe(FILLER + HISTORY_DAYS + 5);
    expect(await count()).toBe(deliveriesBefore);
    const id = uuidv7();
    const [appended] = await admin<Array<{ position: number }>>`
      insert into message_events (message_id, organization_id, seq, type, retry_count, data, occurred_at)
      values (${id}, ${organizationId}, 1, 'accepted', 0, '{}', now())
      returning position::int as position`;
    expect(await count()).toBe(deliveriesBefore + 1);
    // The position sequence goes on from where it was.
    expect(appended?.position).toBeGreaterThan(positionBefore);
  });

  it("keeps message_events append-only on every partition: no UPDATE, DELETE or TRUNCATE", async () => {
    const refused = { code: "23001" }; // restrict_violation
    await expect(
      admin`update message_events set retry_count = 1 where message_id = ${ids.today}`,
    ).rejects.toMatchObject(refused);
    await expect(admin`delete from message_events where message_id = ${ids.ahead}`).rejects.toMatchObject(
      refused,
    );
    await expect(admin`truncate message_events`).rejects.toMatchObject(refused);
    await expect(admin.unsafe(`truncate message_events_p${dayOf(now)}`)).rejects.toMatchObject(refused);
    await expect(admin`truncate message_events_default`).rejects.toMatchObject(refused);
    await expect(admin.unsafe(`truncate message_events_before_${dayOf(historyDay)}`)).rejects.toMatchObject(
      refused,
    );
    // The default partition's exception for rows moving to a new partition is for that alone:
    // not for a day partition's rows, nor for a row of the default outside the day named, nor for
    // one whose day's table does not exist.
    for (const [id, day] of [
      [ids.today, new Date(now).toISOString().slice(0, 10)],
      [ids.ahead, new Date(now).toISOString().slice(0, 10)],
      [ids.ahead, new Date(now + 30 * DAY).toISOString().slice(0, 10)],
      [ids.ahead, "on"],
    ] as const)
      await expect(
        admin.begin(async (tx) => {
          await tx`select set_config('notify.moving_from_default', ${day}, true)`;
          await tx`delete from message_events where message_id = ${id}`;
        }),
      ).rejects.toMatchObject(refused);
    // Keys refuse a duplicate event, as the optimistic concurrency of appends needs.
    await expect(
      admin`insert into message_events (message_id, organization_id, seq, type, retry_count, data, occurred_at)
        values (${ids.today}, ${organizationId}, 3, 'success', 0, '{}', now())`,
    ).rejects.toMatchObject({ code: "23505", constraint_name: `message_events_p${dayOf(now)}_pkey` });
  });
});

/** A client of one connection that keeps the text of every statement it sends. */
function recordingClient() {
  const sent: string[] = [];
  const sql = postgres(url, { max: 1, onnotice: () => {}, debug: (_connection, query) => sent.push(query) });
  return { sql, sent };
}

/**
 * The plan Postgres runs a prepared statement with once it has run it a few times (when it may
 * switch to a generic plan), with the partitions it read: those of its lines not marked `never
 * executed`.
 */
async function executedPlan(statement: string, types: string, args: string) {
  return admin.begin(async (tx) => {
    await tx.unsafe(`prepare lookup(${types}) as ${statement}`);
    for (let run = 0; run < 8; run++) await tx.unsafe(`execute lookup(${args})`);
    const rows = await tx.unsafe<Array<{ "QUERY PLAN": string }>>(
      `explain (analyze, costs off, timing off, summary off) execute lookup(${args})`,
    );
    await tx.unsafe("deallocate lookup");
    const lines = rows.map((row) => row["QUERY PLAN"]);
    const read = lines
      .filter((line) => !line.includes("never executed"))
      .flatMap((line) => [...line.matchAll(/ on ((?:messages|message_events)_(?:p\d{8}|default))\b/g)])
      .map((match) => match[1]);
    return { plan: lines.join("\n"), partitions: [...new Set(read)].sort() };
  });
}

describe("the tests' UUIDv7 made in SQL", () => {
  it("is of its instant's day, even in the day's last half millisecond (truncated, not rounded)", async () => {
    const [row] = await admin.unsafe<Array<{ day: string }>>(
      `select to_char(message_partition_day(${uuidv7At("timestamptz '2026-11-25 23:59:59.9996+00'")}), 'YYYY-MM-DD') as day`,
    );
    expect(row?.day).toBe("2026-11-25");
  });
});

describe("a lookup by id", () => {
  beforeAll(async () => {
    await admin`analyze messages`;
    await admin`analyze message_events`;
  });

  it("reads one partition's primary key: the API's grouped read of records", async () => {
    const { plan, partitions } = await executedPlan(FIND_RECORDS, "uuid[]", `array['${ids.today}']::uuid[]`);
    expect(partitions).toEqual([`messages_p${dayOf(now)}`]);
    expect(plan).toContain(`messages_p${dayOf(now)}_pkey`);
    expect(plan).not.toContain("Seq Scan");
  });

  it("reads one partition per day of the ids asked for, and nothing else: the worker's grouped load", async () => {
    const { plan, partitions } = await executedPlan(
      LOAD_FOR_DELIVERY,
      "uuid[]",
      `array['${ids.today}', '${ids.threeDaysAgo}']::uuid[]`,
    );
    expect(partitions).toEqual([`message_events_p${dayOf(now - 3 * DAY)}`, `message_events_p${dayOf(now)}`]);
    // (The three-day-old partition holds 3 rows: a scan of it is the planner's right choice.)
    expect(plan).toContain(`message_events_p${dayOf(now)}_pkey`);
    expect(plan).not.toContain(`Seq Scan on message_events_p${dayOf(now)}`);
  });

  it("reads one partition's primary key: a message's history", async () => {
    const { plan, partitions } = await executedPlan(LOAD_EVENTS, "uuid", `'${ids.today}'`);
    expect(partitions).toEqual([`message_events_p${dayOf(now)}`]);
    expect(plan).toContain(`message_events_p${dayOf(now)}_pkey`);
  });
});

describe("the worker's load", () => {
  // Today's table counted by ANALYZE (3,000 filler messages): ready to be read by name.
  beforeAll(async () => {
    await admin`analyze message_events`;
  });

  /** The load's statements sent to Postgres (postgres.js's own lookups left out). */
  const loadStatements = (sent: string[]) => sent.filter((text) => text.includes("organization_active"));

  /**
   * Loads through one connection, one after another, with the load's clock at the times given
   * (ms from now); their rows, the load statements each sent (a failed one too) and the questions
   * it asked about a day's table.
   */
  async function loads(batches: Array<{ ids: string[]; at?: number }>) {
    const { sql, sent } = recordingClient();
    try {
      let clock = now;
      const load = rowsFromPartitions(sql, () => clock);
      const results: Array<{ rows: LoadRow[]; statements: string[]; questions: number }> = [];
      for (const batch of batches) {
        clock = now + (batch.at ?? 0);
        const before = sent.length;
        const rows = await load(batch.ids);
        const batchSent = sent.slice(before);
        results.push({
          rows,
          statements: loadStatements(batchSent),
          questions: batchSent.filter((text) => text.includes("reltuples")).length,
        });
      }
      return { results };
    } finally {
      await sql.end();
    }
  }
  const loaded = async (messageIds: string[]) => {
    const { results } = await loads([{ ids: messageIds }]);
    return results[0] as { rows: LoadRow[]; statements: string[] };
  };
  /** The same ids through the statement on the parent. */
  const fromParent = (messageIds: string[]) =>
    admin.unsafe<Array<{ message_id: string; seq: number }>>(LOAD_FOR_DELIVERY, [messageIds]);
  const keys = (rows: ReadonlyArray<{ message_id: string; seq: number }>) =>
    rows.map((row) => `${row.message_id}/${row.seq}`);
  /** Ids of today's filler messages. */
  const todays = async (count: number) =>
    (
      await admin<Array<{ id: string }>>`
        select message_id as id from message_events
        where message_id > ${ids.today} and message_partition_day(message_id) = message_partition_day(${ids.today}::uuid)
          and seq = 1
        order by message_id limit ${count}`
    ).map((row) => row.id);

  it("names each id's day partition from its first 48 bits, and none for bits of no plausible day", () => {
    expect(eventsPartitionOf(uuidv7({ msecs: Date.UTC(2026, 10, 28, 23, 59, 59, 999) }))).toBe(
      "message_events_p20261128",
    );
    expect(eventsPartitionOf(uuidv7({ msecs: Date.UTC(2026, 10, 29) }))).toBe("message_events_p20261129");
    expect(eventsPartitionOf(uuidv7({ msecs: Date.UTC(9999, 11, 31, 23, 59, 59, 999) }))).toBe(
      "message_events_p99991231",
    );
    expect(eventsPartitionOf("00000000-0000-4000-8000-000000000000")).toBeUndefined();
    expect(eventsPartitionOf("ffffffff-ffff-4fff-bfff-ffffffffffff")).toBeUndefined();
  });

  it("reads one id of a day from that day's partition by name, still as an array", async () => {
    const { rows, statements } = await loaded([ids.today]);
    expect(keys(rows)).toEqual(keys(await fromParent([ids.today])));
    expect(rows).toHaveLength(3);
    expect(statements).toHaveLength(1);
    expect(statements[0]).toContain(`from message_events_p${dayOf(now)} e`);
    expect(statements[0]).toContain("e.message_id = any($1::uuid[])");
  });

  it("reads several ids of one day from that day's partition", async () => {
    const both = [ids.today, ...(await todays(1))];
    const { rows, statements } = await loaded(both);
    expect(keys(rows)).toEqual(keys(await fromParent(both)));
    expect(rows).toHaveLength(6);
    expect(statements[0]).toContain(`from message_events_p${dayOf(now)} e`);
    expect(statements[0]).toContain("= any($1::uuid[])");
  });

  it("reads the parent for ids of several days, of a day without its partition, of the history partition, of no day or of another UUID version: the same rows", async () => {
    // A UUIDv4 whose random bits name today (its table exists): still read through the parent.
    const v4OfToday = `${ids.today.slice(0, 14)}4${ids.today.slice(15)}`;
    await admin`insert into message_events (message_id, organization_id, seq, type, retry_count, data, occurred_at)
      values (${v4OfToday}, ${organizationId}, 1, 'accepted', 0, '{}', now())`;
    for (const [messageIds, events] of [
      [[ids.today, ids.threeDaysAgo], 6],
      [[ids.ahead], 3],
      [[ids.longAgo], 3],
      [[ids.notV7], 3],
      [["00000000-0000-4000-8000-000000000000"], 0],
      [[v4OfToday], 1],
    ] as const) {
      const { rows, statements } = await loaded([...messageIds]);
      expect(keys(rows)).toEqual(keys(await fromParent([...messageIds])));
      expect(rows).toHaveLength(events);
      expect(statements).toEqual([expect.stringContaining("from message_events e")]);
    }
  });

  it("asks again whether a day's table is ready only 5 s after it was not (here: missing)", async () => {
    const { results } = await loads([
      { ids: [ids.ahead] },
      { ids: [ids.ahead], at: PARTITION_READY_RECHECK_MS - 1 },
      { ids: [ids.ahead], at: PARTITION_READY_RECHECK_MS + 1 },
      { ids: [ids.today] },
      { ids: [ids.today], at: 3_600_000 },
    ]);
    expect(results.map((result) => result.questions)).toEqual([1, 0, 1, 1, 0]);
    for (const result of results.slice(0, 3)) {
      expect(keys(result.rows)).toEqual(keys(await fromParent([ids.ahead])));
      expect(result.statements).toEqual([expect.stringContaining("from message_events e")]);
    }
    expect(results[4]?.statements).toEqual([expect.stringContaining(`from message_events_p${dayOf(now)} e`)]);
  });
});

describe("the webhook claim's details", () => {
  beforeAll(async () => {
    await admin`analyze messages`;
    await admin`analyze message_events`;
  });

  /**
   * Claims the deliveries of `messageIds` (every other delivery put off until tomorrow) through a
   * connection of its own, with the process's knowledge of day tables; the claimed deliveries and
   * the details statements sent.
   */
  async function claimOf(messageIds: string[]) {
    await admin`update webhook_deliveries set next_attempt_at = now() + interval '1 day', leased_until = null`;
    await admin`update webhook_deliveries set next_attempt_at = now() where message_id = any(${messageIds}::uuid[])`;
    const { sql, sent } = recordingClient();
    try {
      const claim = await claimDueDeliveries(sql, {
        limit: 100,
        perEndpoint: 100,
        inFlight: new Map(),
        leaseMs: 30_000,
        dayTables: createDayTables(sql),
      });
      return {
        deliveries: claim.deliveries,
        statements: sent.filter((text) => text.includes("c.ord::integer")),
      };
    } finally {
      await sql.end();
    }
  }

  it("reads a ready day's tables by name when the messages are all of that day", async () => {
    const todays = (
      await admin<Array<{ id: string }>>`
        select message_id as id from messages
        where message_id > ${ids.today} and message_partition_day(message_id) = message_partition_day(${ids.today}::uuid)
        order by message_id limit 3`
    ).map((row) => row.id);
    const { deliveries, statements } = await claimOf(todays);
    expect(statements).toEqual([expect.stringContaining(`join messages_p${dayOf(now)} m`)]);
    expect(statements[0]).toContain(`join message_events_p${dayOf(now)} ev`);
    expect(deliveries.map((d) => d.messageId).sort()).toEqual([...todays].sort());
    for (const delivery of deliveries) {
      expect(delivery.event).toMatchObject({ type: "accepted", seq: 1 });
      expect(delivery.message).toMatchObject({ channel: "sms", priority: "medium" });
    }
  });

  it("reads the parent tables when only one of the day's two tables is ready", async () => {
    // A day of 400 messages: its events' table counts 1,200 rows (ready), its records' 400 (not).
    const twoDaysAgo = Array.from({ length: 400 }, () => uuidv7({ msecs: now - 2 * DAY }));
    const date = new Date(now - 2 * DAY).toISOString().slice(0, 10);
    await admin`select create_message_partitions(${date}::date, ${date}::date)`;
    await addMessages(twoDaysAgo);
    await admin`analyze messages`;
    await admin`analyze message_events`;
    // The day's two tables sit on either side of the readiness threshold.
    expect(twoDaysAgo.length).toBeLessThan(READY_PARTITION_ROWS);
    expect(3 * twoDaysAgo.length).toBeGreaterThanOrEqual(READY_PARTITION_ROWS);
    const day = dayOf(now - 2 * DAY);
    const counted = await admin<Array<{ relname: string; reltuples: number }>>`
      select relname, reltuples from pg_class
      where relname in (${`messages_p${day}`}, ${`message_events_p${day}`}) order by relname`;
    expect(counted).toEqual([
      { relname: `message_events_p${day}`, reltuples: 1200 },
      { relname: `messages_p${day}`, reltuples: 400 },
    ]);
    const chosen = twoDaysAgo.slice(0, 3);
    const { deliveries, statements } = await claimOf(chosen);
    expect(statements).toEqual([expect.stringContaining("join messages m")]);
    expect(statements[0]).toContain("join message_events ev");
    expect(deliveries.map((d) => d.messageId).sort()).toEqual([...chosen].sort());
    for (const delivery of deliveries) expect(delivery.event).toMatchObject({ type: "accepted", seq: 1 });
  });

  it("reads the parent tables for messages of several days", async () => {
    const { deliveries, statements } = await claimOf([ids.today, ids.threeDaysAgo]);
    expect(statements).toEqual([expect.stringContaining("join messages m")]);
    expect(deliveries.map((d) => d.messageId).sort()).toEqual([ids.today, ids.threeDaysAgo].sort());
    for (const delivery of deliveries)
      expect(delivery.message).toMatchObject({ channel: "sms", priority: "medium" });
  });
});
