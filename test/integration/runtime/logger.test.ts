import { Writable } from "node:stream";
import { eq } from "drizzle-orm";
import pino from "pino";
import postgres from "postgres";
import { afterAll, describe, expect, inject, it } from "vitest";
import { createDatabase } from "../../../db/client.js";
import { organizations } from "../../../db/schema.js";
import { loggableError } from "../../../src/runtime/logger.js";

const { db, sql } = createDatabase({ url: inject("databaseUrl"), poolSize: 1 });
afterAll(() => sql.end({ timeout: 5 }));

describe("error logging", () => {
  it("keeps a failed query's parameters (personal data) out of the logged error", async () => {
    const secret = "+14155559999 private text";
    const error = await db
      .select()
      .from(organizations)
      .where(eq(organizations.id, secret))
      .then(() => undefined)
      .catch((e: unknown) => e);
    expect(String((error as Error).message)).toContain(secret); // drizzle puts it there

    let logged = "";
    const sink = new Writable({
      write(chunk, _encoding, done) {
        logged += chunk.toString();
        done();
      },
    });
    const logger = pino(
      { serializers: { err: (e: unknown) => pino.stdSerializers.err(loggableError(e) as Error) } },
      sink,
    );
    logger.error({ err: error }, "query failed");
    expect(JSON.parse(logged).err.message).toBe('invalid input syntax for type uuid: "[redacted]"');
    expect(logged).not.toContain("+14155559999");
    expect(logged).not.toContain("private text");
  });

  it("keeps the text Postgres quotes from a message (detail, where) out of a postgres.js error", async () => {
    const error = await sql`select ${'{"to":"+14155559999","body":"private text \\ud800"}'}::jsonb`
      .then(() => undefined)
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(postgres.PostgresError);
    expect(JSON.stringify(error)).toContain("private text"); // Postgres quotes it in `where`

    const logged = JSON.stringify(pino.stdSerializers.err(loggableError(error) as Error));
    expect(JSON.parse(logged)).toMatchObject({ code: "22P02" });
    expect(logged).not.toContain("+14155559999");
    expect(logged).not.toContain("private text");
  });

  it("passes other errors through unchanged", () => {
    const plain = new Error("plain");
    expect(loggableError(plain)).toBe(plain);
  });
});
