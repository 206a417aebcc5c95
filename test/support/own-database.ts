import { randomUUID } from "node:crypto";
import { inject } from "vitest";
import { dropDatabase, ensureDatabase, runMigrations } from "../../db/migrate.js";

/**
 * A migrated database of this file's own, beside the run's shared one: for tests that lock whole
 * tables, add triggers or count table scans, which the test files running alongside would disturb.
 */
export async function createOwnDatabase(label: string): Promise<{ url: string; drop: () => Promise<void> }> {
  const url = new URL(inject("databaseUrl"));
  url.pathname = `/${url.pathname.slice(1)}_${label}_${randomUUID().slice(0, 8)}`;
  await ensureDatabase(url.toString());
  await runMigrations(url.toString());
  return { url: url.toString(), drop: () => dropDatabase(url.toString()) };
}
