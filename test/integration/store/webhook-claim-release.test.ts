import { randomBytes, randomUUID } from "node:crypto";
import type postgres from "postgres";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createDatabase } from "../../../db/client.js";
import { claimDueDeliveries } from "../../../src/store/webhook-deliveries.js";
import { createOwnDatabase } from "../../support/own-database.js";

/**
 * The claim leases its deliveries in one statement and reads what their POSTs need in a second
 * (src/store/webhook-deliveries.ts). When the second fails, the leases, already committed, are
 * given back, so the deliveries go at the next claim rather than once their leases run out. In a
 * database of this file's own: the test renames a table the second statement reads.
 */

const organizationId = randomUUID();
const endpointId = randomUUID();

let dropOwnDatabase: () => Promise<void> = async () => {};
let sql: postgres.Sql;

beforeAll(async () => {
  const own = await createOwnDatabase("webhook_claim_release");
  dropOwnDatabase = own.drop;
  sql = createDatabase({ url: own.url, poolSize: 1 }).sql;
  await sql`insert into organizations (id, product_id, name, active) values (${organizationId}, 'p', 'Release', true)`;
  await sql`insert into webhook_endpoints (id, organization_id, url, enabled, secret_sealed, created_at, updated_at)
    values (${endpointId}, ${organizationId}, 'https://example.com/hook', true, ${randomBytes(40)}, now(), now())`;
  await sql`insert into webhook_deliveries (endpoint_id, organization_id, message_id, seq, event_type, event_at)
    select ${endpointId}, ${organizationId}, gen_random_uuid(), 1, 'message.succeeded', now()
    from generate_series(1, 5)`;
});

afterAll(async () => {
  await sql?.end();
  await dropOwnDatabase();
});

const claim = () =>
  claimDueDeliveries(sql, { limit: 10, perEndpoint: 10, inFlight: new Map(), leaseMs: 30_000, after: null });

describe("a claim whose read of the deliveries' details fails", () => {
  it("fails, and gives back the leases it took", async () => {
    const leased = () => sql<Array<{ n: number }>>`
      select count(*)::int as n from webhook_deliveries where leased_until is not null`;
    await sql`alter table messages rename to messages_away`;
    try {
      await expect(claim()).rejects.toThrow(/messages/);
    } finally {
      await sql`alter table messages_away rename to messages`;
    }
    expect((await leased())[0]?.n).toBe(0);
    // The next claim leases them all again (their messages are not in this database, so it hands
    // out none, as for deliveries whose messages are gone).
    await claim();
    expect((await leased())[0]?.n).toBe(5);
  });
});
