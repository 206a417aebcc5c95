import { randomUUID } from "node:crypto";
import { sql } from "drizzle-orm";
import postgres from "postgres";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createDatabase, type Database } from "../../../db/client.js";
import { WEBHOOK_RECOVER_MESSAGE_LOOKBACK_MS } from "../../../src/domain/webhooks.js";
import {
  PARTITIONWISE_JOIN,
  recoverWebhookDeliveries,
  recoveryStatement,
} from "../../../src/store/webhooks.js";
import { createOwnDatabase } from "../../support/own-database.js";
import { uuidv7At } from "../../support/uuidv7-sql.js";

/**
 * `POST …/{id}/recover` finds an organization's events since an instant without reading
 * `message_events` whole: that table has no index by organization or time, and adding one would
 * cost every append. It goes through the organization's messages by `(organization_id,
 * created_at)` and to their events by `(message_id, seq)`. Checked on tables large enough that a
 * scan would be the planner's choice if the statement allowed none better, in a database of this
 * file's own (another test's rows would change the statistics).
 */

const DAY = 24 * 3_600_000;
const recovering = randomUUID();
const busy = randomUUID();
const endpointId = randomUUID();

let dropOwnDatabase: () => Promise<void> = async () => {};
let admin: postgres.Sql;
let database: { db: Database; sql: postgres.Sql };

beforeAll(async () => {
  const own = await createOwnDatabase("recover");
  dropOwnDatabase = own.drop;
  admin = postgres(own.url, { max: 1, onnotice: () => {} });
  database = createDatabase({ url: own.url, poolSize: 1 });
  // The partitions of the last days, as the worker made them day by day (docs/decisions/0042).
  await admin`select create_message_partitions((now() at time zone 'UTC')::date - 11, (now() at time zone 'UTC')::date)`;
  for (const [id, count] of [
    [recovering, 4_000],
    [busy, 60_000],
  ] as const) {
    await admin`insert into organizations (id, product_id, name, active) values (${id}, ${id}, 'Recover', true)`;
    // Messages spread over the last 10 days, each accepted, attempted and delivered within a minute.
    await admin`
      with made as (
        select ${admin.unsafe(uuidv7At("at"))} as id, at
        from (select now() - (g * interval '10 days' / ${count}) as at from generate_series(1, ${count}) g) times
      ),
      events as (
        insert into message_events (message_id, organization_id, seq, type, retry_count, data, occurred_at)
        select id, ${id}, s.seq, s.type, 0, s.data, at + s.seq * interval '10 seconds'
        from made cross join (values
          (1, 'accepted', '{}'::jsonb),
          (2, 'pending', '{"kind":"attempt_started","attempt":1}'::jsonb),
          (3, 'success', '{"attempt":1,"provider":"simulator","providerMessageId":"x"}'::jsonb)
        ) as s(seq, type, data)
      )
      insert into messages (message_id, organization_id, product_id, channel, status, priority,
        sender, retry_enabled, retry_count, version, created_at, updated_at)
      select id, ${id}, ${id}, 'sms', 'success', 'medium', 'ACME', true, 0, 3, at, at + interval '30 seconds'
      from made`;
  }
  await admin`
    insert into webhook_endpoints (id, organization_id, url, enabled, secret_sealed, created_at, updated_at)
    values (${endpointId}, ${recovering}, 'https://hooks.example.com/', true, '\\x00', now(), now())`;
  await admin`analyze messages`;
  await admin`analyze message_events`;
});

afterAll(async () => {
  await database?.sql.end();
  await admin?.end();
  await dropOwnDatabase();
});

describe("recovering an endpoint's events", () => {
  it("reads the organization's messages by (organization_id, created_at) and their events by (message_id, seq), never message_events whole", async () => {
    const since = new Date(Date.now() - DAY);
    const request = {
      organizationId: recovering,
      endpointId,
      since,
      messagesCreatedSince: new Date(since.getTime() - WEBHOOK_RECOVER_MESSAGE_LOOKBACK_MS),
      limit: 100_000,
    };
    const rows = await database.db.transaction(async (tx) => {
      await tx.execute(PARTITIONWISE_JOIN);
      return tx.execute<{ "QUERY PLAN": string }>(sql`explain ${recoveryStatement(request)}`);
    });
    const plan = rows.map((row) => row["QUERY PLAN"]).join("\n");
    // The indexes of the day partitions (docs/decisions/0042): messages_organization_created_idx's
    // and the primary key (message_id, seq).
    expect(plan).toMatch(/messages_p\d{8}_organization_id_created_at_message_id_idx/);
    expect(plan).toMatch(/message_events_p\d{8}_pkey/);
    // No scan of a partition but of the coming days' empty ones (costed 0).
    expect(plan).not.toMatch(/Seq Scan on message_events\w* +\(cost=(?!0\.00\.\.0\.00 )/);
    expect(plan).not.toMatch(/Seq Scan on messages\w* +\(cost=(?!0\.00\.\.0\.00 )/);

    // And it does what it was planned for: a day of the organization's messages, 2 events each sent.
    const recovered = await recoverWebhookDeliveries(database.db, request);
    expect(recovered.nextSince).toBeNull();
    expect(recovered.recovered).toBe(recovered.queued);
    expect(recovered.recovered).toBeGreaterThan(2 * 350);
    expect(recovered.recovered).toBeLessThan(2 * 450);
  });
});
