import { randomUUID } from "node:crypto";
import postgres from "postgres";
import { inject } from "vitest";
import { ensureDatabase, runMigrations } from "../../../db/migrate.js";

/**
 * A migrated database of this file's own, beside the run's shared one: for tests that lock whole
 * tables or add triggers, which would stall or disturb the test files running alongside.
 */
export async function createOwnDatabase(label: string): Promise<{ url: string; drop: () => Promise<void> }> {
  const url = new URL(inject("databaseUrl"));
  const name = `${url.pathname.slice(1)}_${label}_${randomUUID().slice(0, 8)}`;
  url.pathname = `/${name}`;
  await ensureDatabase(url.toString());
  await runMigrations(url.toString());
  return {
    url: url.toString(),
    async drop() {
      const admin = new URL(url);
      admin.pathname = "/postgres";
      const sql = postgres(admin.toString(), { max: 1, onnotice: () => {} });
      try {
        await sql.unsafe(`drop database if exists "${name}" with (force)`);
      } finally {
        await sql.end();
      }
    },
  };
}
