import { randomUUID } from "node:crypto";
import postgres from "postgres";
import { v7 as uuidv7 } from "uuid";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createDatabase, type Database } from "../../../db/client.js";
import { createMetrics } from "../../../src/observability/metrics.js";
import { createDayTables } from "../../../src/store/day-partitions.js";
import { loadEvents } from "../../../src/store/events.js";
import { pageOfMessages } from "../../../src/store/listing.js";
import { rebuildProjections } from "../../../src/store/rebuild.js";
import { createRecordFinder } from "../../../src/store/records.js";
import { LOAD_FOR_DELIVERY } from "../../../workers/delivery-store.js";
import {
  analyseYoungDayTables,
  maintainMessagePartitions,
  utcDay,
} from "../../../workers/message-partitions.js";
import { testContentVault } from "../../support/content-keys.js";
import { createOwnDatabase } from "../../support/own-database.js";
import { uuidv7At } from "../../support/uuidv7-sql.js";

/**
 * The worker's upkeep of the day partitions (docs/decisions/0042): the coming days made ahead,
 * the days past MESSAGE_RETENTION_DAYS dropped whole, after which a message is not found, exactly
 * like an unknown one, by any reader; rows the default partition took moved to the day partition
 * made for them. In a database of this file's own: it drops and creates tables.
 */

const DAY = 86_400_000;
const NOW = Date.now();
const organizationId = randomUUID();

let dropOwnDatabase: () => Promise<void> = async () => {};
let database: { db: Database; sql: postgres.Sql };
let url = "";

beforeAll(async () => {
  const own = await createOwnDatabase("partitions");
  dropOwnDatabase = own.drop;
  url = own.url;
  database = createDatabase({ url: own.url, poolSize: 2 });
  await database.sql`insert into organizations (id, product_id, name, active) values (${organizationId}, 'p', 'Partitions', true)`;
});

afterAll(async () => {
  await database?.sql.end();
  await dropOwnDatabase();
});

/** A message accepted at `at` and attempted, with its record, written as the store writes them before content is sealed. */
async function addMessage(id: string, at: number, sql: postgres.Sql = database.sql) {
  const createdAt = new Date(at).toISOString();
  await sql`
    with events as (
      insert into message_events (message_id, organization_id, seq, type, retry_count, data, occurred_at)
      values
        (${id}, ${organizationId}, 1, 'accepted', 0,
          jsonb_build_object('id', ${id}::text, 'channel', 'sms', 'recipient', '+14155550100', 'sender', 'ACME',
            'body', 'kept?', 'organizationId', ${organizationId}::text, 'productId', 'p', 'priority', 'medium',
            'notificationType', null, 'retryEnabled', true, 'expiresAt', '2999-01-01T00:00:00.000Z'),
          ${createdAt}::timestamptz),
        (${id}, ${organizationId}, 2, 'pending', 0, '{"kind":"attempt_started","attempt":1}', ${createdAt}::timestamptz)
    )
    insert into messages (message_id, organization_id, product_id, channel, status, priority,
      recipient, sender, body, retry_enabled, retry_count, version, created_at, updated_at)
    values (${id}, ${organizationId}, 'p', 'sms', 'pending', 'medium', '+14155550100', 'ACME', 'kept?',
      true, 0, 2, ${createdAt}::timestamptz, ${createdAt}::timestamptz)`;
}

/** The partitions holding the message's event 1 and record. */
async function whereIs(id: string) {
  const [row] = await database.sql<Array<{ events: string; record: string }>>`
    select e.tableoid::regclass::text as events, m.tableoid::regclass::text as record
    from message_events e join messages m using (message_id) where e.message_id = ${id} and e.seq = 1`;
  return row;
}

/** The `notification_message_partitions` gauge's values, by state, as a scrape reads them. */
async function partitionGauge(): Promise<Record<string, number>> {
  const text = await createMetrics({ process: "worker", db: database.db }).scrape();
  const values: Record<string, number> = {};
  for (const match of text.matchAll(/^notification_message_partitions\{state="(\w+)"[^}]*\} (\d+)$/gm))
    values[match[1] as string] = Number(match[2]);
  return values;
}

const partitionName = (table: string, at: number) => `${table}_p${utcDay(new Date(at)).replaceAll("-", "")}`;

async function exists(table: string): Promise<boolean> {
  const [row] = await database.sql<
    Array<{ exists: boolean }>
  >`select to_regclass(${table}) is not null as exists`;
  return row?.exists ?? false;
}

describe("the day partitions", () => {
  it("are made ahead, and the days past retention are dropped whole: their messages are then found by no reader", async () => {
    // Partitions of 100 days ago, as a worker made them then, and a message of that day; one of
    // 89 days ago (in retention) and one of today.
    await maintainMessagePartitions(database.sql, {
      now: new Date(NOW - 100 * DAY),
      retentionDays: 90,
      aheadDays: 0,
    });
    await maintainMessagePartitions(database.sql, {
      now: new Date(NOW - 89 * DAY),
      retentionDays: 90,
      aheadDays: 0,
    });
    const old = uuidv7({ msecs: NOW - 100 * DAY });
    const kept = uuidv7({ msecs: NOW - 89 * DAY });
    const recent = uuidv7({ msecs: NOW });
    for (const [id, at] of [
      [old, NOW - 100 * DAY],
      [kept, NOW - 89 * DAY],
      [recent, NOW],
    ] as const)
      await addMessage(id, at);
    expect(await whereIs(old)).toEqual({
      events: partitionName("message_events", NOW - 100 * DAY),
      record: partitionName("messages", NOW - 100 * DAY),
    });
    const findRecord = createRecordFinder(database.sql, testContentVault(database.sql));
    expect((await findRecord(organizationId, old))?.messageId).toBe(old);

    const result = await maintainMessagePartitions(database.sql, { now: new Date(NOW), retentionDays: 90 });

    expect(result.dropped).toBe(2); // the day of 100 days ago: its partition of each table
    expect(result.defaultHoldsRows).toBe(false);
    expect(await exists(partitionName("messages", NOW - 100 * DAY))).toBe(false);
    expect(await exists(partitionName("message_events", NOW - 100 * DAY))).toBe(false);
    for (let day = 0; day <= 7; day++)
      expect(await exists(partitionName("messages", NOW + day * DAY))).toBe(true);
    // GET /messages/{id}, its events, the listing, the rebuild: the old message is gone from all.
    expect(await findRecord(organizationId, old)).toBeUndefined();
    expect(await loadEvents(database.sql, old, organizationId)).toEqual([]);
    expect((await findRecord(organizationId, kept))?.messageId).toBe(kept);
    expect((await loadEvents(database.sql, kept, organizationId)).map((stored) => stored.seq)).toEqual([
      1, 2,
    ]);
    const page = await pageOfMessages(database.db, testContentVault(database.sql), organizationId, {
      limit: 10,
    });
    expect(page.rows.map((row) => row.messageId)).toEqual([recent, kept]);
    expect(await rebuildProjections(database.sql)).toBe(2);
    expect((await findRecord(organizationId, recent))?.body).toBe("kept?");
    // What an operator sees: today and 7 days ahead, one past day (89 days ago), no default rows.
    expect(await partitionGauge()).toEqual({ ahead: 8, kept: 1, default_used: 0 });
  });

  it("take the rows the default partition held for their day, losing none", async () => {
    // An id from 20 days ahead: no partition yet, so the default one takes it.
    const ahead = uuidv7({ msecs: NOW + 20 * DAY });
    await addMessage(ahead, NOW + 20 * DAY);
    expect(await whereIs(ahead)).toEqual({ events: "message_events_default", record: "messages_default" });
    const rowsOf = async () =>
      database.sql<Array<{ row: unknown }>>`
        select to_jsonb(e) as row from message_events e where message_id = ${ahead}
        union all select to_jsonb(m) from messages m where message_id = ${ahead}`;
    const before = await rowsOf();
    // No one deletes it from there meanwhile: the move's exception waits for its day's table.
    await expect(
      database.sql.begin(async (tx) => {
        await tx`select set_config('notify.moving_from_default', 'on', true)`;
        await tx`delete from message_events where message_id = ${ahead}`;
      }),
    ).rejects.toMatchObject({ code: "23001" });

    // A worker 15 days from now makes the partitions up to 22 days ahead.
    const result = await maintainMessagePartitions(database.sql, {
      now: new Date(NOW + 15 * DAY),
      retentionDays: 3650,
    });

    expect(result.created).toBeGreaterThanOrEqual(2);
    expect(result.defaultHoldsRows).toBe(false);
    expect(await whereIs(ahead)).toEqual({
      events: partitionName("message_events", NOW + 20 * DAY),
      record: partitionName("messages", NOW + 20 * DAY),
    });
    expect(await rowsOf()).toEqual(before);
    // Still append-only there.
    await expect(database.sql`delete from message_events where message_id = ${ahead}`).rejects.toMatchObject({
      code: "23001",
    });
  });

  it("make the partition of a past day (within retention) whose rows the default partition took while no worker ran", async () => {
    const missed = uuidv7({ msecs: NOW - 10 * DAY });
    await addMessage(missed, NOW - 10 * DAY);
    expect(await whereIs(missed)).toEqual({ events: "message_events_default", record: "messages_default" });

    const result = await maintainMessagePartitions(database.sql, { now: new Date(NOW), retentionDays: 90 });

    expect(result.failed).toEqual([]);
    expect(result.created).toBe(2);
    expect(result.defaultHoldsRows).toBe(false);
    expect(await whereIs(missed)).toEqual({
      events: partitionName("message_events", NOW - 10 * DAY),
      record: partitionName("messages", NOW - 10 * DAY),
    });
  });

  it("leave an id whose bits point to no day made in the default partition, which retention never drops, and say so", async () => {
    const notV7 = randomUUID();
    await addMessage(notV7, NOW);
    const result = await maintainMessagePartitions(database.sql, { now: new Date(NOW), retentionDays: 7 });
    expect(result.defaultHoldsRows).toBe(true);
    expect((await partitionGauge()).default_used).toBe(1);
    expect(await whereIs(notV7)).toEqual({ events: "message_events_default", record: "messages_default" });
  });

  it("are kept by every worker at once without a clash: they take turns", async () => {
    const now = new Date(NOW + 40 * DAY);
    const results = await Promise.all(
      [1, 2, 3].map(() => maintainMessagePartitions(database.sql, { now, retentionDays: 3650 })),
    );
    // Days 40 to 47 ahead are new (the previous test made up to 22): 8 days, 2 tables each, once.
    expect(results.reduce((sum, result) => sum + result.created, 0)).toBe(16);
  });

  it("move a row of another UUID version whose first 48 bits fall in a day being made, and make the other days too", async () => {
    // A UUIDv4 whose first 48 bits are the time of 60 days ahead: routed by value, like any id.
    const hex = (NOW + 60 * DAY).toString(16).padStart(12, "0");
    const random = randomUUID();
    const id = `${hex.slice(0, 8)}-${hex.slice(8)}-${random.slice(14)}`;
    expect(id[14]).toBe("4");
    await addMessage(id, NOW);
    expect(await whereIs(id)).toEqual({ events: "message_events_default", record: "messages_default" });

    const result = await maintainMessagePartitions(database.sql, {
      now: new Date(NOW + 55 * DAY),
      retentionDays: 3650,
    });

    expect(result.failed).toEqual([]);
    expect(result.created).toBe(16); // days 55 to 62 ahead
    expect(await whereIs(id)).toEqual({
      events: partitionName("message_events", NOW + 60 * DAY),
      record: partitionName("messages", NOW + 60 * DAY),
    });
  });

  it("make a day's partition while a row of that day is inserted: the insert waits (and is refused), the attach does not fail", async () => {
    const at = NOW + 70 * DAY;
    const sessions = [1, 2, 3].map(() => postgres(url, { max: 1, onnotice: () => {} }));
    const [reader, creator, writer] = sessions as [postgres.Sql, postgres.Sql, postgres.Sql];
    /** Whether another session waits for a lock in a statement containing `text`. */
    const waiting = async (text: string) => {
      const [row] = await database.sql<Array<{ waiting: boolean }>>`
        select exists (select 1 from pg_stat_activity where datname = current_database()
          and pid <> pg_backend_pid() and wait_event_type = 'Lock' and query like ${`%${text}%`}) as waiting`;
      return row?.waiting ?? false;
    };
    const until = async (check: () => Promise<boolean> | boolean) => {
      while (!(await check())) await new Promise((resolve) => setTimeout(resolve, 20));
    };
    try {
      // A long read of the default partition: the ATTACH waits for it (its ACCESS EXCLUSIVE lock).
      let release = () => {};
      const released = new Promise<void>((resolve) => {
        release = resolve;
      });
      let reading = false;
      const read = reader.begin(async (tx) => {
        await tx`select count(*) from message_events_default`;
        reading = true;
        await released;
      });
      await until(() => reading);
      // The worker's step for message_events of that day: it waits for the reader, at the ATTACH.
      const day = utcDay(new Date(at));
      const creating = creator<Array<{ created: number }>>`
        select create_message_partition('message_events', ${day}::date) as created`
        .execute()
        .then(
          (rows) => rows,
          (error: unknown) => error,
        );
      await until(() => waiting("create_message_partition"));
      // Meanwhile a message of that day is accepted.
      const late = uuidv7({ msecs: at });
      let settled = false;
      // Its outcome taken at once: a refusal that came while the test awaits something else would
      // otherwise be an unhandled rejection.
      const inserting = addMessage(late, at, writer)
        .then(
          () => "inserted",
          (error: { code?: string }) => error.code,
        )
        .finally(() => {
          settled = true;
        });
      await until(async () => settled || (await waiting("insert into message_events")));
      release();
      await read;

      expect(await creating).toEqual([{ created: 1 }]);
      const inserted = await inserting;
      // Then the step for messages.
      expect(await creator`select create_message_partition('messages', ${day}::date) as created`).toEqual([
        { created: 1 },
      ]);
      // The insert, routed to the default partition before the ATTACH, is refused once it gets the
      // lock (Postgres checks the default partition's new bound: 23514, the accept fails and is
      // retried), or lands in the day's partition: never in the default partition.
      expect(["inserted", "23514"]).toContain(inserted);
      const [inDefault] = await database.sql<Array<{ count: number }>>`
        select (select count(*) from message_events_default where message_id = ${late})
          + (select count(*) from messages_default where message_id = ${late}) as count`;
      expect(Number(inDefault?.count)).toBe(0);
      if (inserted === "inserted")
        expect(await whereIs(late)).toEqual({
          events: partitionName("message_events", at),
          record: partitionName("messages", at),
        });
    } finally {
      await Promise.all(sessions.map((session) => session.end()));
    }
  });

  it("drop a long history past retention in rounds: more days than one transaction's locks could hold", async () => {
    // 700 days of partitions (1400 tables), 800 to 101 days ago, made 10 days per transaction. One
    // transaction dropping them all would hold ~25 locks per day: past Postgres's lock table
    // (max_locks_per_transaction 64 × 100 connections), "out of shared memory".
    for (let first = 800; first > 100; first -= 10)
      await database.sql`select create_message_partitions(${utcDay(new Date(NOW), -first)}::date,
        ${utcDay(new Date(NOW), -(first - 9))}::date)`;
    const old = uuidv7({ msecs: NOW - 250 * DAY });
    await addMessage(old, NOW - 250 * DAY);

    const result = await maintainMessagePartitions(database.sql, { now: new Date(NOW), retentionDays: 90 });

    expect(result.failed).toEqual([]);
    expect(result.dropped).toBe(1400);
    expect(await whereIs(old)).toBeUndefined();
  }, 120_000);

  it("delete the webhook deliveries and outbox rows of the messages they drop: none is left leased for a message gone", async () => {
    const endpointId = randomUUID();
    await database.sql`
      insert into webhook_endpoints (id, organization_id, url, event_types, enabled, secret_sealed, created_at, updated_at)
      values (${endpointId}, ${organizationId}, 'https://hooks.example.com/', array['message.accepted'], true, '\\x00', now(), now())`;
    try {
      // A message of 30 days ago in its day's partition, and one of today: each with its delivery
      // (the fan-out of its accepted event) and an outbox row.
      await database.sql`select create_message_partitions(${utcDay(new Date(NOW), -30)}::date, ${utcDay(new Date(NOW), -30)}::date)`;
      const dropped = uuidv7({ msecs: NOW - 30 * DAY });
      const kept = uuidv7({ msecs: NOW });
      for (const [id, at] of [
        [dropped, NOW - 30 * DAY],
        [kept, NOW],
      ] as const) {
        await addMessage(id, at);
        await database.sql`insert into delivery_outbox (message_id, queue_prefix, priority) values (${id}, 'q', 2)`;
      }
      const rowsOf = async (id: string) => {
        const [row] = await database.sql<Array<{ deliveries: number; outbox: number }>>`
          select (select count(*)::int from webhook_deliveries where message_id = ${id}) as deliveries,
            (select count(*)::int from delivery_outbox where message_id = ${id}) as outbox`;
        return row;
      };
      expect(await rowsOf(dropped)).toEqual({ deliveries: 1, outbox: 1 });

      const result = await maintainMessagePartitions(database.sql, { now: new Date(NOW), retentionDays: 14 });

      expect(result.failed).toEqual([]);
      expect(await whereIs(dropped)).toBeUndefined();
      expect(await rowsOf(dropped)).toEqual({ deliveries: 0, outbox: 0 });
      expect(await rowsOf(kept)).toEqual({ deliveries: 1, outbox: 1 });
    } finally {
      await database.sql`delete from webhook_deliveries where endpoint_id = ${endpointId}`;
      await database.sql`delete from delivery_outbox where queue_prefix = 'q'`;
      await database.sql`delete from webhook_endpoints where id = ${endpointId}`;
    }
  });

  it("make each day on its own: a day that cannot be made now does not hold back the others, and is made on the next run", async () => {
    // Another session is creating a table of the name of day 83's `messages` partition, and has not
    // committed: that step waits for it, and gives up after its lock timeout.
    const now = new Date(NOW + 80 * DAY);
    const blocked = partitionName("messages", NOW + 83 * DAY);
    const other = postgres(url, { max: 1, onnotice: () => {} });
    let release = () => {};
    const released = new Promise<void>((resolve) => {
      release = resolve;
    });
    try {
      let holding = false;
      const hold = other
        .begin(async (tx) => {
          await tx.unsafe(`create table ${blocked} (x int)`);
          holding = true;
          await released;
          throw new Error("roll back");
        })
        .catch(() => {});
      while (!holding) await new Promise((resolve) => setTimeout(resolve, 20));

      const first = await maintainMessagePartitions(database.sql, { now, retentionDays: 3650 });
      release();
      await hold;

      expect(first.failed.map((failure) => failure.step)).toEqual([`create messages ${utcDay(now, 3)}`]);
      expect(first.created).toBe(15); // days 80 to 87 ahead, but day 83's messages partition
      expect(await exists(partitionName("messages", NOW + 87 * DAY))).toBe(true);
      expect(await exists(blocked)).toBe(false);
      const second = await maintainMessagePartitions(database.sql, { now, retentionDays: 3650 });
      expect(second).toMatchObject({ created: 1, failed: [] });
      expect(await exists(blocked)).toBe(true);
    } finally {
      release();
      await other.end();
    }
  });
});

describe("the day tables without statistics", () => {
  it("are analysed once they hold 1,000 live rows, not before, and once (a VACUUM alone does not count, a statistics reset undoes nothing): the load's estimate for a hundred ids is then about a hundred rows, not a good part of the day", async () => {
    // Noon of a day of its own (rows written an hour later stay in its table).
    const day = new Date(NOW + 120 * DAY);
    const now = new Date(Date.UTC(day.getUTCFullYear(), day.getUTCMonth(), day.getUTCDate(), 12));
    await database.sql`select create_message_partitions(${utcDay(now, -1)}::date, ${utcDay(now, 1)}::date)`;
    const today = partitionName("message_events", now.getTime());
    const yesterday = partitionName("message_events", now.getTime() - DAY);
    const todaysRecords = partitionName("messages", now.getTime());
    const tables = [-1, 0, 1].flatMap((days) =>
      ["message_events", "messages"].map((table) => partitionName(table, now.getTime() + days * DAY)),
    );
    // Autovacuum kept out of it: its ANALYZE would count the tables before the upkeep does.
    for (const table of tables)
      await database.sql.unsafe(`alter table ${table} set (autovacuum_enabled = off)`);
    const addEvents = (at: number, count: number) =>
      database.sql.unsafe(
        `insert into message_events (message_id, organization_id, seq, type, retry_count, data, occurred_at)
         select ${uuidv7At(`to_timestamp(${at / 1000}) + g * interval '1 ms'`)}, $1, 1, 'accepted', 0, '{}', now()
         from generate_series(1, $2::int) g`,
        [organizationId, count],
      );
    /** Waits (bounded) until the statistics have heard of the rows written: a moment after the commits. */
    const untilCounted = async (table: string, live: number, written: number) => {
      for (let waited = 0; ; waited += 100) {
        const [row] = await database.sql<Array<{ live: number; written: number }>>`
          select pg_stat_get_live_tuples(to_regclass(${table}))::int as live,
            pg_stat_get_mod_since_analyze(to_regclass(${table}))::int as written`;
        if ((row?.live ?? 0) >= live && (row?.written ?? 0) >= written) return;
        expect(waited).toBeLessThan(10_000);
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
    };
    await addEvents(now.getTime() - DAY, 999);
    await addEvents(now.getTime(), 20_000);
    // Today's records: 500, each changed three times since (1,500 rows written, 500 live).
    await database.sql.unsafe(
      `insert into messages (message_id, organization_id, product_id, channel, status, priority, recipient, sender,
         body, retry_enabled, retry_count, version, created_at, updated_at)
       select ${uuidv7At(`to_timestamp(${now.getTime() / 1000}) + g * interval '1 ms'`)}, $1, 'p', 'sms', 'pending',
         'medium', '+14155550100', 'ACME', 'b', true, 0, 1, now(), now()
       from generate_series(1, 500) g`,
      [organizationId],
    );
    for (let change = 0; change < 3; change++)
      await database.sql`update ${database.sql(todaysRecords)} set version = version + 1`;
    await untilCounted(today, 20_000, 20_000);
    await untilCounted(yesterday, 999, 999);
    await untilCounted(todaysRecords, 500, 2_000);
    const ids = (
      await database.sql<Array<{ id: string }>>`select message_id as id from ${database.sql(today)} limit 100`
    ).map((row) => row.id);
    const estimate = async () => {
      const [row] = await database.sql.unsafe<
        Array<{ "QUERY PLAN": Array<{ Plan: { "Plan Rows": number } }> }>
      >(`explain (format json) ${LOAD_FOR_DELIVERY}`, [ids]);
      return row?.["QUERY PLAN"][0]?.Plan["Plan Rows"] ?? 0;
    };
    const ready = () => createDayTables(database.sql).ready([today]);
    expect(await estimate()).toBeGreaterThan(2_000);
    expect(await ready()).toBe(false);

    // Another ANALYZE (or VACUUM) holding the table: skipped, not waited for; found at the next run.
    const holder = postgres(url, { max: 1, onnotice: () => {} });
    try {
      await holder.begin(async (tx) => {
        await tx.unsafe(`lock table ${today} in share update exclusive mode`);
        expect(await analyseYoungDayTables(database.sql, now)).toEqual({
          analysed: [],
          skipped: [today],
          notAnalysable: [],
        });
      });
    } finally {
      await holder.end();
    }
    // A VACUUM counts the rows without any statistics of the columns: still not ready, still young.
    await database.sql.unsafe(`vacuum ${today}`);
    const [vacuumed] = await database.sql<Array<{ reltuples: number }>>`
      select reltuples::float8 as reltuples from pg_class where oid = to_regclass(${today})`;
    expect(vacuumed?.reltuples).toBeGreaterThanOrEqual(20_000);
    expect(await estimate()).toBeGreaterThan(2_000);
    expect(await ready()).toBe(false);
    expect(await analyseYoungDayTables(database.sql, now)).toEqual({
      analysed: [today],
      skipped: [],
      notAnalysable: [],
    });

    expect(await estimate()).toBeLessThan(300);
    expect(await ready()).toBe(true);
    const analysed = await database.sql<Array<{ relname: string }>>`
      select relname from pg_stat_user_tables where relname in ${database.sql(tables)} and last_analyze is not null`;
    expect(analysed.map((row) => row.relname)).toEqual([today]);
    // Counted now: not again, however much more the day takes (autovacuum's from then on).
    await addEvents(now.getTime() + 3_600_000, 2_000);
    await untilCounted(today, 22_000, 2_000);
    expect(await analyseYoungDayTables(database.sql, now)).toEqual({
      analysed: [],
      skipped: [],
      notAnalysable: [],
    });
    // Its last one past the line, yesterday's table is counted at the next run.
    await addEvents(now.getTime() - DAY + 3_600_000, 1);
    await untilCounted(yesterday, 1_000, 1_000);
    expect(await analyseYoungDayTables(database.sql, now)).toEqual({
      analysed: [yesterday],
      skipped: [],
      notAnalysable: [],
    });

    // The cumulative statistics reset (a crash, pg_stat_reset(), a failover, pg_upgrade): the column
    // statistics stay in the catalog, and so do the tables' readiness; nothing is analysed again.
    await database.sql`select pg_stat_reset()`;
    const [reset] = await database.sql<Array<{ at: Date | null }>>`
      select pg_stat_get_last_analyze_time(to_regclass(${today})) as at`;
    expect(reset?.at).toBeNull();
    expect(await createDayTables(database.sql).ready([today, yesterday])).toBe(true);
    expect(await analyseYoungDayTables(database.sql, now)).toEqual({
      analysed: [],
      skipped: [],
      notAnalysable: [],
    });
  });
});
