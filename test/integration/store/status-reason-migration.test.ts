import { randomUUID } from "node:crypto";
import postgres from "postgres";
import { v7 as uuidv7 } from "uuid";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { dropDatabase, ensureDatabase } from "../../../db/migrate.js";
import { fillStatusReasons } from "../../../workers/status-reasons.js";
import { migrateBefore, migrateWith } from "../../support/migrations.js";

/**
 * Migration 0019 (`…_scheduled-sends`) adds the record's `status_reason`; the workers then fill it
 * for the messages that had already ended failed or rejected (workers/status-reasons.ts), with
 * their last such event's reason, as the projection (and a rebuild) gives it; the others stay
 * null. Once: a second run does nothing. In a database of this file's own.
 */

let url = "";
let admin: postgres.Sql;
const organizationId = randomUUID();
const ids = { failed: uuidv7(), rejected: uuidv7(), success: uuidv7(), retried: uuidv7() };

beforeAll(async () => {
  const base = new URL(inject("databaseUrl"));
  base.pathname = `/${base.pathname.slice(1)}_reasons_${randomUUID().slice(0, 8)}`;
  url = base.toString();
  await ensureDatabase(url);
  await migrateBefore(url, "_scheduled-sends");
  admin = postgres(url, { max: 1, onnotice: () => {} });
  await admin`insert into organizations (id, product_id, name, active) values (${organizationId}, 'p', 'Reasons', true)`;
  const histories: Array<[string, string, Array<[string, Record<string, unknown>]>]> = [
    [ids.failed, "failed", [["failed", { reason: "retries_exhausted", attempt: 5 }]]],
    [ids.rejected, "rejected", [["rejected", { reason: "recipient_refused", attempt: 1 }]]],
    [ids.success, "success", [["success", { attempt: 1, provider: "simulator", providerMessageId: "x" }]]],
    // A retry scheduled on the way does not hide the reason it ended with.
    [
      ids.retried,
      "failed",
      [
        ["pending", { kind: "retry_scheduled" }],
        ["failed", { reason: "ttl_expired", attempt: 2 }],
      ],
    ],
  ];
  for (const [id, status, events] of histories) {
    const all: Array<[string, Record<string, unknown>]> = [["accepted", { id, channel: "sms" }], ...events];
    for (const [index, [type, data]] of all.entries()) {
      await admin`insert into message_events (message_id, organization_id, seq, type, retry_count, data, occurred_at)
        values (${id}, ${organizationId}, ${index + 1}, ${type}, 0, ${admin.json(data as never)}, now())`;
    }
    await admin`insert into messages (message_id, organization_id, product_id, channel, status, priority,
        sender, retry_enabled, retry_count, version, created_at, updated_at)
      values (${id}, ${organizationId}, 'p', 'sms', ${status}, 'medium', 'ACME', true, 0, ${all.length}, now(), now())`;
  }
  await migrateWith(url);
}, 60_000);

afterAll(async () => {
  await admin?.end();
  await dropDatabase(url);
});

describe("status_reason of the messages already ended (migration 0019, then the workers)", () => {
  it("is null after the migration, then the reason of their failed or rejected event; null for the others", async () => {
    const [before] = await admin<Array<{ n: number }>>`select count(status_reason)::int as n from messages`;
    expect(before?.n).toBe(0);
    expect(await fillStatusReasons(admin)).toBe(3);
    const rows = await admin<Array<{ message_id: string; status_reason: string | null }>>`
      select message_id, status_reason from messages`;
    expect(Object.fromEntries(rows.map((row) => [row.message_id, row.status_reason]))).toEqual({
      [ids.failed]: "retries_exhausted",
      [ids.rejected]: "recipient_refused",
      [ids.success]: null,
      [ids.retried]: "ttl_expired",
    });
    // Done once: recorded, and not looked at again.
    expect(await fillStatusReasons(admin)).toBeUndefined();
  });
});
