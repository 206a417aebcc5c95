import { afterAll, describe, expect, inject, it } from "vitest";
import { createDatabase } from "../../../db/client.js";
import { postgresError } from "../../../db/errors.js";

const { sql } = createDatabase({ url: inject("databaseUrl"), poolSize: 1, statementTimeoutMs: 300 });
afterAll(() => sql.end({ timeout: 5 }));

describe("createDatabase with a statement time-out", () => {
  it("gives every connection of the pool Postgres's statement_timeout", async () => {
    const [row] = await sql<Array<{ statement_timeout: string }>>`show statement_timeout`;
    expect(row?.statement_timeout).toBe("300ms");
  });

  it("has Postgres cancel a statement that runs longer (57014, query_canceled)", async () => {
    const error = await sql`select pg_sleep(2)`.then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(postgresError(error)?.code).toBe("57014");
  });
});
