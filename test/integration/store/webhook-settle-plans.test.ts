import { randomBytes, randomUUID } from "node:crypto";
import type postgres from "postgres";
import { v7 as uuidv7 } from "uuid";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createDatabase } from "../../../db/client.js";
import { type DeliverySettlement, settleDeliveries } from "../../../src/store/webhook-deliveries.js";
import { createOwnDatabase } from "../../support/own-database.js";
import { scansDuring } from "../../support/table-scans.js";

/**
 * The settle of webhook attempts (src/store/webhook-deliveries.ts) finds the deliveries it changes
 * by their keys, whatever it has to do. `webhook_deliveries` is a table whose rows come and go
 * (one per event and endpoint, deleted once delivered), so between two vacuums it is mostly dead
 * rows: a settle that read it whole, as one did at every batch to find the retries and the
 * disabled endpoints' deliveries even when there were none, read hundreds of pages of them (the
 * webhooks benchmark: 1 to 8 ms of a 5 to 18 ms settle). In a database of this file's own, with
 * autovacuum off for the table, so the dead rows stay as they would between two vacuums.
 */

const organizationId = randomUUID();
const endpoints = { healthy: randomUUID(), gone: randomUUID() };

let dropOwnDatabase: () => Promise<void> = async () => {};
let ownUrl = "";
let sql: postgres.Sql;

beforeAll(async () => {
  const own = await createOwnDatabase("webhook_settle_plans");
  dropOwnDatabase = own.drop;
  ownUrl = own.url;
  // The service's own client: its JSON parameters go as they are given (drizzle's setting).
  sql = createDatabase({ url: own.url, poolSize: 1 }).sql;
  await sql`insert into organizations (id, product_id, name, active) values (${organizationId}, 'p', 'Settle', true)`;
  for (const id of Object.values(endpoints)) {
    await sql`insert into webhook_endpoints (id, organization_id, url, enabled, secret_sealed, created_at, updated_at)
      values (${id}, ${organizationId}, 'https://example.com/hook', true, ${randomBytes(40)}, now(), now())`;
  }
  await sql`alter table webhook_deliveries set (autovacuum_enabled = off)`;
  // 20,000 deliveries come and all but 100 go, as a busy minute leaves the table.
  await sql`insert into webhook_deliveries (endpoint_id, organization_id, message_id, seq, event_type, event_at)
    select ${endpoints.healthy}, ${organizationId}, gen_random_uuid(), 1, 'message.succeeded', now()
    from generate_series(1, 20000)`;
  await sql`delete from webhook_deliveries where id > 100`;
  await sql`insert into webhook_deliveries (endpoint_id, organization_id, message_id, seq, event_type, event_at)
    select ${endpoints.gone}, ${organizationId}, gen_random_uuid(), 1, 'message.succeeded', now()
    from generate_series(1, 10)`;
  await sql`analyze webhook_deliveries`;
});

afterAll(async () => {
  await sql?.end();
  await dropOwnDatabase();
});

/** Claims deliveries as the dispatcher does (a lease), returning each with its lease. */
function leased(endpointId: string, count: number) {
  return leasedOn(sql, endpointId, count);
}

async function leasedOn(sql: postgres.Sql, endpointId: string, count: number) {
  return sql<Array<{ id: string; leased_until: string }>>`
    update webhook_deliveries set leased_until = now() + interval '30 seconds'
    where id in (select id from webhook_deliveries where endpoint_id = ${endpointId} and leased_until is null
                 order by id limit ${count})
    returning id, leased_until::text as leased_until`;
}

function settlement(
  endpointId: string,
  row: { id: string; leased_until: string },
  result: DeliverySettlement["result"],
): DeliverySettlement {
  const delivered = result === "delivered";
  return {
    deliveryId: Number(row.id),
    endpointId,
    organizationId,
    attemptId: uuidv7(),
    attemptsBefore: 0,
    leasedUntil: row.leased_until,
    eventId: `evt_${row.id}_1`,
    eventType: "message.succeeded",
    attemptedAt: new Date(),
    durationMs: 2,
    statusCode: delivered ? 200 : result === "gone" ? 410 : 503,
    errorClass: delivered ? null : "http",
    errorCode: delivered ? null : `http_${result === "gone" ? 410 : 503}`,
    result,
    ...(result === "retry" ? { retryAt: new Date(Date.now() + 5_000) } : {}),
  };
}

const options = () => ({ now: new Date(), failingDisableMs: 5 * 86_400_000 });

describe("a settle of webhook attempts in a table of mostly dead rows", () => {
  it("removes a batch of delivered ones by their ids, reading no table whole", async () => {
    const rows = await leased(endpoints.healthy, 30);
    const scans = await scansDuring(sql, "webhook_deliveries", (tx) =>
      settleDeliveries(
        tx,
        rows.map((row) => settlement(endpoints.healthy, row, "delivered")),
        options(),
      ),
    );
    expect(scans.seq_scan).toBe(0);
    const [left] = await sql<Array<{ n: number }>>`
      select count(*)::int as n from webhook_deliveries where id = any(${rows.map((row) => row.id)}::bigint[])`;
    expect(left?.n).toBe(0);
    const [attempts] = await sql<Array<{ n: number }>>`
      select count(*)::int as n from webhook_attempts where event_id = any(${rows.map((row) => `evt_${row.id}_1`)})`;
    expect(attempts?.n).toBe(30);
  });

  it("reschedules a retry by its id too", async () => {
    const [retried] = await leased(endpoints.healthy, 1);
    const scans = await scansDuring(sql, "webhook_deliveries", (tx) =>
      settleDeliveries(tx, [settlement(endpoints.healthy, retried as never, "retry")], options()),
    );
    expect(scans.seq_scan).toBe(0);
    const [row] = await sql<Array<{ attempts: number; leased: boolean }>>`
      select attempts, leased_until is not null as leased from webhook_deliveries where id = ${retried?.id as string}`;
    expect(row).toEqual({ attempts: 1, leased: false });
  });

  it("drops a 410's endpoint's deliveries, every one of them", async () => {
    const [gone] = await leased(endpoints.gone, 1);
    await settleDeliveries(sql, [settlement(endpoints.gone, gone as never, "gone")], options());
    const [dropped] = await sql<Array<{ n: number }>>`
      select count(*)::int as n from webhook_deliveries where endpoint_id = ${endpoints.gone}`;
    expect(dropped?.n).toBe(0);
    // And only that endpoint's: the healthy one keeps its 70 (100 less the 30 delivered; the
    // one retried stays).
    const [kept] = await sql<Array<{ n: number }>>`
      select count(*)::int as n from webhook_deliveries where endpoint_id = ${endpoints.healthy}`;
    expect(kept?.n).toBe(70);
    const [endpoint] = await sql<Array<{ enabled: boolean; disabled_reason: string }>>`
      select enabled, disabled_reason from webhook_endpoints where id = ${endpoints.gone}`;
    expect(endpoint).toEqual({ enabled: false, disabled_reason: "gone" });
  });
});

/**
 * The same settle on a connection whose kept plan was made while the table was empty: a vacuum of
 * a drained table leaves it no page and statistics that say so, and the settles of a quiet spell
 * (a few deliveries each) then make Postgres keep the cheapest plan through nothing, a sequential
 * scan, which it would still run once a burst filled the table (until the next analyze).
 */
describe("a settle on a delivery table that filled since the settle was first run", () => {
  let quiet: postgres.Sql;

  beforeAll(async () => {
    await sql`delete from webhook_deliveries`;
    await sql`vacuum analyze webhook_deliveries`;
    // A connection of its own: its kept plans are made here, not by the tests above.
    quiet = createDatabase({ url: ownUrl, poolSize: 1 }).sql;
    for (let i = 0; i < 10; i++) {
      await quiet`insert into webhook_deliveries (endpoint_id, organization_id, message_id, seq, event_type, event_at)
        select ${endpoints.healthy}, ${organizationId}, gen_random_uuid(), 1, 'message.succeeded', now()
        from generate_series(1, 2)`;
      const rows = await leasedOn(quiet, endpoints.healthy, 2);
      await settleDeliveries(
        quiet,
        rows.map((row) => settlement(endpoints.healthy, row, i % 2 === 0 ? "delivered" : "retry")),
        options(),
      );
      await quiet`delete from webhook_deliveries`;
    }
  });

  afterAll(async () => {
    await quiet?.end();
  });

  it("still finds its rows by their ids once the table holds 20,000", async () => {
    await quiet`insert into webhook_deliveries (endpoint_id, organization_id, message_id, seq, event_type, event_at)
      select ${endpoints.healthy}, ${organizationId}, gen_random_uuid(), 1, 'message.succeeded', now()
      from generate_series(1, 20000)`;
    const delivered = await leasedOn(quiet, endpoints.healthy, 20);
    const retried = await leasedOn(quiet, endpoints.healthy, 10);
    const scans = await scansDuring(quiet, "webhook_deliveries", (tx) =>
      settleDeliveries(
        tx,
        [
          ...delivered.map((row) => settlement(endpoints.healthy, row, "delivered")),
          ...retried.map((row) => settlement(endpoints.healthy, row, "retry")),
        ],
        options(),
      ),
    );
    expect(scans.seq_scan).toBe(0);
    const [left] = await quiet<Array<{ n: number }>>`select count(*)::int as n from webhook_deliveries`;
    expect(left?.n).toBe(20000 - 20);
  });
});
