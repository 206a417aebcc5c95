import { randomUUID } from "node:crypto";
import postgres from "postgres";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createDatabase } from "../../../db/client.js";
import { IDEMPOTENCY_WINDOW_MS } from "../../../src/store/accept-batcher.js";
import { createRecordFinder } from "../../../src/store/records.js";
import { createDeliveryStore } from "../../../workers/delivery-store.js";
import { PRUNE_MARGIN_MS, pruneIdempotencyKeys } from "../../../workers/idempotency-pruner.js";
import { testContentVault } from "../../support/content-keys.js";
import { eventually } from "../../support/harness.js";
import { createOwnDatabase } from "../../support/own-database.js";
import { uuidv7At } from "../../support/uuidv7-sql.js";

/**
 * The worker's grouped load and the API's grouped read must find their batch through the primary
 * key however large the table has grown since their statement was first planned. Joined to a
 * JSON set (`json_array_elements_text`, `json_to_recordset`), they got Postgres to scan the whole
 * `message_events` / `messages` table for every batch on tables of up to ~100k rows: quadratic
 * in a new database under load (22.5 M rows read for 20,000 messages in the benchmark).
 *
 * The pruning of expired idempotency keys is held to the same rule.
 *
 * A database of its own, so that no other test's scans are counted: the tables grow in steps
 * while the same statements keep loading batches, as they do under load, and the table
 * statistics then tell how many rows sequential scans read.
 */
const ROUNDS = 6;
const PER_ROUND = 4000;
const BATCH = 20;

let url = "";
let dropOwnDatabase: () => Promise<void> = async () => {};
let admin: postgres.Sql;
const organizationId = randomUUID();

beforeAll(async () => {
  const own = await createOwnDatabase("scans");
  url = own.url;
  dropOwnDatabase = own.drop;
  admin = postgres(url, { max: 1, onnotice: () => {} });
  await admin`insert into organizations (id, product_id, name, active) values (${organizationId}, 'scans', 'Scans', true)`;
});

afterAll(async () => {
  await admin?.end();
  await dropOwnDatabase();
});

/** Rows read by sequential scans of these tables, once every backend that read them has reported. */
async function scansOf(tables: string[]) {
  // A backend reports its table statistics as it exits, a moment after its socket closes.
  return eventually(
    async () => {
      // A partitioned table's reads are its partitions' (docs/decisions/0042): summed up.
      const rows = await admin<
        Array<{ relname: string; seq_tup_read: string; idx_scan: string; used: boolean }>
      >`
        select coalesce(parent.relname, s.relname) as relname, sum(s.seq_tup_read) as seq_tup_read,
          sum(s.idx_scan) as idx_scan, bool_or(coalesce(s.idx_scan, 0) + s.seq_scan > 0) as used
        from pg_stat_user_tables s
        left join pg_inherits i on i.inhrelid = s.relid
        left join pg_class parent on parent.oid = i.inhparent
        where coalesce(parent.relname, s.relname) = any(${tables})
        group by 1 order by 1`;
      return rows.length === tables.length && rows.every((table) => table.used) ? rows : undefined;
    },
    5000,
    `the table statistics of ${tables.join(", ")}`,
  );
}

/** `count` accepted messages, with their event and their record; returns their ids. */
async function addMessages(count: number): Promise<string[]> {
  const rows = await admin<Array<{ id: string }>>`
    with ids as (select ${admin.unsafe(uuidv7At("now()"))} as id from generate_series(1, ${count})),
    events as (
      insert into message_events (message_id, organization_id, seq, type, retry_count, data, occurred_at)
      select id, ${organizationId}, 1, 'accepted', 0,
        jsonb_build_object('id', id, 'channel', 'sms', 'recipient', '+14155550100', 'sender', 'ACME',
          'body', 'scan', 'organizationId', ${organizationId}::text, 'productId', 'scans',
          'priority', 'medium', 'notificationType', null, 'retryEnabled', true,
          'expiresAt', '2099-01-01T00:00:00.000Z'),
        now()
      from ids
    )
    insert into messages (message_id, organization_id, product_id, channel, status, priority,
      recipient, sender, body, retry_enabled, retry_count, version, created_at, updated_at)
    select id, ${organizationId}, 'scans', 'sms', 'accepted', 'medium', '+14155550100', 'ACME',
      'scan', true, 0, 1, now(), now()
    from ids
    returning message_id as id`;
  return rows.map((row) => row.id);
}

describe("grouped loads and reads of messages", () => {
  it("use the primary key as the tables grow, never a scan of the whole table per batch", async () => {
    const { sql } = createDatabase({ url, poolSize: 1 });
    const deliveries = createDeliveryStore(sql, testContentVault(sql));
    const findRecord = createRecordFinder(sql, testContentVault(sql));
    let total = 0;
    try {
      for (let round = 0; round < ROUNDS; round++) {
        const ids = (await addMessages(PER_ROUND)).slice(0, BATCH);
        total += PER_ROUND;
        const loads = await Promise.all(ids.map((id) => deliveries.load(id)));
        expect(loads.map((load) => [load.state.status, load.organizationActive])).toEqual(
          ids.map(() => ["accepted", true]),
        );
        const reads = await Promise.all(ids.map((id) => findRecord(organizationId, id)));
        expect(reads.map((row) => row?.messageId)).toEqual(ids);
        // Another organization's key finds nothing.
        expect(await findRecord(randomUUID(), ids[0] as string)).toBeUndefined();
      }
    } finally {
      await sql.end(); // its backend reports its table statistics as it exits
    }
    const scans = await scansOf(["message_events", "messages"]);
    // A whole-table scan per batch would read 4k + 8k + … + 24k = 84k rows of each table.
    for (const table of scans) {
      expect(Number(table.idx_scan), table.relname).toBeGreaterThan(0);
      expect(Number(table.seq_tup_read), table.relname).toBeLessThan(total / 4);
    }
  });
});

describe("pruning expired idempotency keys", () => {
  it("finds them through the created_at index and deletes them by address, never scanning the table per batch", async () => {
    const fresh = 20_000;
    const expired = 1000;
    const expiredAt = new Date(Date.now() - IDEMPOTENCY_WINDOW_MS - 2 * PRUNE_MARGIN_MS).toISOString();
    await admin`
      insert into idempotency_keys (organization_id, key, request_hash, message_id, created_at)
      select ${organizationId}, 'fresh-' || g, '', gen_random_uuid(), now() from generate_series(1, ${fresh}) g`;
    await admin`
      insert into idempotency_keys (organization_id, key, request_hash, message_id, created_at)
      select ${organizationId}, 'expired-' || g, '', gen_random_uuid(), ${expiredAt}::timestamptz
      from generate_series(1, ${expired}) g`;
    await admin`analyze idempotency_keys`; // as autovacuum keeps a table this size analysed

    const sql = postgres(url, { max: 1, onnotice: () => {} });
    try {
      expect(await pruneIdempotencyKeys(sql, { now: new Date(), batchSize: 100 })).toBe(expired);
    } finally {
      await sql.end();
    }

    // Ten batches: a scan of the whole table for each would read 10 × 21,000 rows. (Read before
    // the count below, whose own scan would be counted once its backend reports.)
    const [table] = await scansOf(["idempotency_keys"]);
    expect(Number(table?.idx_scan)).toBeGreaterThan(0);
    expect(Number(table?.seq_tup_read)).toBeLessThan(fresh);
    const [keys] = await admin<Array<{ count: number }>>`select count(*)::int as count from idempotency_keys`;
    expect(keys?.count).toBe(fresh);
  });
});

describe("erasing a recipient's content", () => {
  it("finds the organization's messages to that recipient through the GIN index on recipient_keys", async () => {
    await admin`
      -- Many messages, a few to each recipient (one blind index each, as an SMS has).
      insert into messages (message_id, organization_id, product_id, channel, status, priority,
        sender, retry_enabled, retry_count, version, created_at, updated_at, recipient_keys)
      select ${admin.unsafe(uuidv7At("now()"))}, ${organizationId}, 'scans', 'sms', 'success', 'medium', 'ACME', true, 0, 1,
        now(), now(), array[md5((g % 5000)::text)]
      from generate_series(1, 40000) g`;
    await admin`analyze messages`;
    // The statement of src/store/erasure.ts, planned as it runs.
    const plan = await admin.begin(async (tx) => {
      const rows = await tx.unsafe<Array<{ "QUERY PLAN": string }>>(
        `explain update messages set content_enc = null, recipient_keys = null
         where organization_id = $1 and recipient_keys && $2::text[]
         returning message_id`,
        [organizationId, ["0123456789abcdef0123456789abcdef"]],
      );
      return rows.map((row) => row["QUERY PLAN"]).join("\n");
    });
    // messages_recipient_keys_idx, on each day partition (docs/decisions/0042).
    expect(plan).toMatch(/messages_p\d{8}_recipient_keys_idx/);
  });
});
