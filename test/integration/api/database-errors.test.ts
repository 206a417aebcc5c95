import postgres from "postgres";
import { v7 as uuidv7 } from "uuid";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createDatabase } from "../../../db/client.js";
import { isDatabaseUnavailable } from "../../../db/errors.js";
import { type AcceptDeps, acceptMessage } from "../../../src/messages/accept.js";
import { createMessageStore } from "../../../src/store/message-store.js";
import { testContentVault } from "../../support/content-keys.js";
import { countMessages, createHarness, type Harness, onboard, sendSms } from "../../support/harness.js";

/**
 * Which Postgres errors mean "the database cannot serve this now, come back shortly" (503 +
 * Retry-After, and no one-by-one re-run of a batch that met one), each produced by the real
 * server: a read-only node after a failover, a cancelled statement, a full disk, a broken link.
 */
let h: Harness;
let readOnly: Harness;
let sql: postgres.Sql;
let organization: Awaited<ReturnType<typeof onboard>>;

/** A connection string whose sessions are read-only, as on a standby a failover left the pool on. */
function readOnlyUrl(base: string): string {
  const target = new URL(base);
  target.searchParams.set("default_transaction_read_only", "on");
  return target.toString();
}

beforeAll(async () => {
  h = createHarness();
  readOnly = createHarness({ DATABASE_URL: readOnlyUrl(h.config.DATABASE_URL) });
  sql = postgres(h.config.DATABASE_URL, { max: 2, onnotice: () => {} });
  organization = await onboard(h);
});

afterAll(async () => {
  await Promise.all([h?.close(), readOnly?.close(), sql?.end()]);
});

/** The error the real server answers a query with. */
async function errorOf(query: () => Promise<unknown>): Promise<unknown> {
  try {
    await query();
  } catch (error) {
    return error;
  }
  throw new Error("the query succeeded");
}

/** The server raises an error with this SQLSTATE (as it would for a full disk, out of memory…). */
const raised = (sqlState: string) =>
  errorOf(() => sql.unsafe(`do $$ begin raise exception 'simulated' using errcode = '${sqlState}'; end $$`));

describe("isDatabaseUnavailable, on errors from the real server", () => {
  it("given a write on a read-only session (25006, a standby after a failover), then it is unavailable", async () => {
    const error = await errorOf(() =>
      sql.begin("read only", (tx) => tx`create table never_created (id int)`),
    );
    expect(error).toMatchObject({ code: "25006" });
    expect(isDatabaseUnavailable(error)).toBe(true);
  });

  it("given a statement cancelled by statement_timeout (57014), then it is unavailable", async () => {
    const error = await errorOf(() =>
      sql.begin(async (tx) => {
        await tx`set local statement_timeout = 1`;
        await tx`select pg_sleep(1)`;
      }),
    );
    expect(error).toMatchObject({ code: "57014" });
    expect(isDatabaseUnavailable(error)).toBe(true);
  });

  it.each([
    ["53000", "insufficient_resources"],
    ["53100", "disk_full"],
    ["53200", "out_of_memory"],
    ["53300", "too_many_connections"],
    ["53400", "configuration_limit_exceeded"],
    ["08000", "connection_exception"],
    ["08006", "connection_failure"],
    ["55P03", "lock_not_available (lock_timeout)"],
    ["57P01", "admin_shutdown"],
  ])("given %s (%s), then it is unavailable", async (code) => {
    const error = await raised(code);
    expect(error).toMatchObject({ code });
    expect(isDatabaseUnavailable(error)).toBe(true);
  });

  it("given errors a retry would meet again, then they are not", async () => {
    const errors = await Promise.all([
      errorOf(() => sql`select * from no_such_table`),
      errorOf(() => sql`select ${"not a uuid"}::uuid`),
      raised("23505"),
      raised("40001"),
    ]);
    expect(errors.map((e) => (e as { code: string }).code)).toEqual(["42P01", "22P02", "23505", "40001"]);
    expect(errors.map(isDatabaseUnavailable)).toEqual([false, false, false, false]);
  });
});

describe("a send when the pool's connections are read-only", () => {
  it("given a write refused with 25006, then the API answers 503 with Retry-After and stores nothing", async () => {
    const before = await countMessages(h, organization.id);
    const response = await sendSms(readOnly, organization.apiKey, {
      payload: { to: "+14155550100", body: "on a standby", sender: "ACME" },
    });

    expect(response.status).toBe(503);
    expect(Number(response.headers.get("retry-after"))).toBeGreaterThan(0);
    expect(Object.keys((await response.json()) as object)).toEqual(["error"]);
    expect(await countMessages(h, organization.id)).toBe(before);
  });

  it("given a batch of 20 refused with 25006, then it is not run again one request at a time", async () => {
    // The organization's data key exists (made by a send before the standby took over), so the
    // read-only connection only has the batch's own statement to refuse.
    await h.deps.store.content.keys.current(organization.id);
    let batchStatements = 0;
    const { sql: client } = createDatabase({
      url: readOnlyUrl(h.config.DATABASE_URL),
      poolSize: 2,
      onQuery: (query) => {
        if (query.includes("insert into idempotency_keys")) batchStatements++;
      },
    });
    try {
      const deps: AcceptDeps = {
        store: createMessageStore({ sql: client, queuePrefix: "ro", content: testContentVault(client) }),
        now: () => new Date(),
        newId: uuidv7,
      };
      const results = await Promise.allSettled(
        Array.from({ length: 20 }, (_, i) =>
          acceptMessage(deps, {
            organization: { ...organization, active: true },
            content: { channel: "sms", recipient: "+14155550100", sender: "ACME", body: `refused ${i}` },
            retryEnabled: true,
            notificationType: undefined,
          }),
        ),
      );
      expect(results.every((r) => r.status === "rejected" && isDatabaseUnavailable(r.reason))).toBe(true);
      expect(batchStatements).toBe(1);
    } finally {
      await client.end();
    }
  });
});
