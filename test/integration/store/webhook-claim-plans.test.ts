import { randomBytes, randomUUID } from "node:crypto";
import type postgres from "postgres";
import { v7 as uuidv7 } from "uuid";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createDatabase } from "../../../db/client.js";
import type { MessageEvent } from "../../../src/domain/events.js";
import { initialState } from "../../../src/domain/state.js";
import { appendEvents, writeAppendsHandingOff } from "../../../src/store/events.js";
import { claimDueDeliveries } from "../../../src/store/webhook-deliveries.js";
import { acceptedSmsEvent } from "../../support/accepted-event.js";
import { createOwnDatabase } from "../../support/own-database.js";
import { scansDuring } from "../../support/table-scans.js";

/**
 * The dispatcher's claim (src/store/webhook-deliveries.ts) reads `webhook_deliveries` through its
 * indexes however the table's size has changed since the claim was first run. The table is a
 * queue: empty between bursts, and a vacuum of a drained table may leave it no page at all, with
 * statistics that say so. A plan Postgres made and kept at such a moment (sequential scans and
 * sorts, the cheapest way through nothing) read the whole table for every endpoint visited and
 * every row looked at once the next burst filled it. In a database of this file's own, the table
 * vacuumed while empty (autovacuum off, so it stays as the vacuum left it), and one connection,
 * whose kept plans are its own.
 */

const organizationId = randomUUID();
const endpoints = Array.from({ length: 50 }, () => randomUUID());

let dropOwnDatabase: () => Promise<void> = async () => {};
let sql: postgres.Sql;

/** A claim as the dispatcher makes it, at 4 slots an endpoint, with nothing in flight. */
const claim = (tx: postgres.Sql, limit = 100, after: string | null = null) =>
  claimDueDeliveries(tx, { limit, perEndpoint: 4, inFlight: new Map(), leaseMs: 30_000, after });

/** A message of the organization accepted (an append that does not hand off). */
async function accepted() {
  const id = uuidv7();
  return appendEvents(sql, initialState, [
    acceptedSmsEvent(id, { id: organizationId, productId: "p" }, new Date().toISOString()),
  ]);
}

/**
 * A message's attempt and success appended by an append that hands off (prepared, as the
 * worker's): the deliveries it wrote itself and returned.
 */
async function handOff(tx: postgres.Sql, state: Awaited<ReturnType<typeof accepted>>) {
  const now = new Date().toISOString();
  const events: MessageEvent[] = [
    { type: "pending", retryCount: 0, occurredAt: now, data: { kind: "attempt_started", attempt: 1 } },
    {
      type: "success",
      retryCount: 0,
      occurredAt: now,
      data: { attempt: 1, provider: "simulator", providerMessageId: "SM0" },
    },
  ];
  return (await writeAppendsHandingOff(tx, [{ state, events }], 60_000)).handed;
}

beforeAll(async () => {
  const own = await createOwnDatabase("webhook_claim_plans");
  dropOwnDatabase = own.drop;
  sql = createDatabase({ url: own.url, poolSize: 1 }).sql;
  await sql`insert into organizations (id, product_id, name, active) values (${organizationId}, 'p', 'Claim', true)`;
  for (const id of endpoints) {
    // Of final events only: an append that hands off (below) writes their deliveries itself.
    await sql`insert into webhook_endpoints (id, organization_id, url, enabled, secret_sealed, event_types, created_at, updated_at)
      values (${id}, ${organizationId}, 'https://example.com/hook', true, ${randomBytes(40)},
        '{message.succeeded,message.failed}', now(), now())`;
  }
  await sql`alter table webhook_deliveries set (autovacuum_enabled = off)`;
  await sql`vacuum analyze webhook_deliveries`;
  // A quiet spell: the dispatcher's claims find nothing; appends that hand off come and go.
  for (let i = 0; i < 12; i++) {
    expect((await claim(sql)).deliveries).toEqual([]);
    expect(await handOff(sql, await accepted())).toHaveLength(endpoints.length);
    await sql`delete from webhook_deliveries`;
  }
});

afterAll(async () => {
  await sql?.end();
  await dropOwnDatabase();
});

describe("a claim on a delivery table that filled since the claim was first run", () => {
  it("visits the endpoints and takes their rows by the indexes, not by reading the table for each", async () => {
    // A burst: 400 events for each of the 50 endpoints.
    await sql`insert into webhook_deliveries (endpoint_id, organization_id, message_id, seq, event_type, event_at)
      select e, ${organizationId}, gen_random_uuid(), 1, 'message.succeeded', now()
      from unnest(${endpoints}::uuid[]) e cross join generate_series(1, 400)`;
    const scans = await scansDuring(sql, "webhook_deliveries", (tx) => claim(tx));
    // The claim leased its 100 (its messages are not in this database, so it hands out none: the
    // leases run out, as for a delivery whose message is gone).
    const [leased] = await sql<Array<{ n: number }>>`
      select count(*)::int as n from webhook_deliveries where leased_until is not null`;
    expect(leased?.n).toBe(100);
    expect(scans.seq_scan).toBe(0);
    // Two probes an endpoint visited (25 of them, 4 rows each), one for each row taken and the
    // order check of each: the plan kept from the empty table made 10,051 sequential scans.
    expect(scans.idx_tup_read).toBeLessThan(1000);
  });
});

describe("the endpoints a claim visits", () => {
  it("are those after the cursor, in the order of their ids, whatever plan Postgres makes", async () => {
    await sql`delete from webhook_deliveries`;
    await sql`insert into webhook_deliveries (endpoint_id, organization_id, message_id, seq, event_type, event_at)
      select e, ${organizationId}, gen_random_uuid(), 1, 'message.succeeded', now()
      from unnest(${endpoints}::uuid[]) e cross join generate_series(1, 10)`;
    // The endpoints were stored in another order than their ids'.
    const byId = [...endpoints].sort();
    expect(endpoints).not.toEqual(byId);
    // A claim of 64 at 4 an endpoint: 16 endpoints. (Their messages are not in this database, so
    // the claim hands out no delivery: what it leased is read from the table.)
    const leasedByEndpoint = async () =>
      Object.fromEntries(
        (
          await sql<Array<{ endpoint_id: string; n: number }>>`
            select endpoint_id, count(*)::int as n from webhook_deliveries where leased_until is not null
            group by endpoint_id`
        ).map((row) => [row.endpoint_id, row.n]),
      );
    const expected: Record<string, number> = {};
    await claim(sql, 64);
    for (const id of byId.slice(0, 16)) expected[id] = 4;
    expect(await leasedByEndpoint()).toEqual(expected);
    // From the 41st: the last ten, then round the circle to the first six, which have rows left.
    await claim(sql, 64, byId[39] as string);
    for (const id of byId.slice(40)) expected[id] = 4;
    for (const id of byId.slice(0, 6)) expected[id] = 8;
    expect(await leasedByEndpoint()).toEqual(expected);
  });
});

describe("the lease of the rows a claim takes", () => {
  it("finds them by their ids, not by reading the table to hash it, once the table holds a few thousand", async () => {
    // Emptied and vacuumed first: the table holds these rows and no more pages than they need.
    await sql`delete from webhook_deliveries`;
    await sql`vacuum webhook_deliveries`;
    await sql`insert into webhook_deliveries (endpoint_id, organization_id, message_id, seq, event_type, event_at)
      select e, ${organizationId}, gen_random_uuid(), 1, 'message.succeeded', now()
      from unnest(${endpoints}::uuid[]) e cross join generate_series(1, 40)`;
    await sql`analyze webhook_deliveries`;
    const scans = await scansDuring(sql, "webhook_deliveries", (tx) => claim(tx, 64));
    const [leased] = await sql<Array<{ n: number }>>`
      select count(*)::int as n from webhook_deliveries where leased_until is not null`;
    expect(leased?.n).toBe(64);
    // Joined to the claimed rows, the update read the table's 2,000 rows to hash them.
    expect(scans.seq_scan).toBe(0);
  });
});

describe("an append that hands off, on a delivery table that filled since it was first run", () => {
  it("writes and returns its deliveries without reading the table, however full", async () => {
    await sql`delete from webhook_deliveries`;
    // A burst of 20,000 rows (decision 0036, "The handoff").
    await sql`insert into webhook_deliveries (endpoint_id, organization_id, message_id, seq, event_type, event_at)
      select e, ${organizationId}, gen_random_uuid(), 3, 'message.succeeded', now()
      from unnest(${endpoints}::uuid[]) e cross join generate_series(1, 400)`;
    let handed: Awaited<ReturnType<typeof handOff>> = [];
    const one = await accepted();
    const deliveries = await scansDuring(sql, "webhook_deliveries", async (tx) => {
      handed = await handOff(tx, one);
    });
    expect(handed.map((row) => row.endpoint_id).sort()).toEqual([...endpoints].sort());
    expect(handed.every((row) => row.url === "https://example.com/hook")).toBe(true);
    // Its inserts check the unique key (an index probe each); nothing else reads the queue.
    expect(deliveries.seq_scan).toBe(0);
    expect(deliveries.idx_tup_read).toBeLessThanOrEqual(2 * endpoints.length);
  });
});
