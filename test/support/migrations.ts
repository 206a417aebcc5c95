import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { drizzle } from "drizzle-orm/postgres-js";
import { migrate } from "drizzle-orm/postgres-js/migrator";
import postgres from "postgres";
import { migrationsFolder } from "../../db/migrate.js";

/**
 * Migrates the database at `url` up to, not including, the migration whose tag ends with
 * `tagSuffix` (`_partitioned-store`), wherever it lands in the journal: the database a release
 * before it left, for the tests of what that migration does to existing rows.
 */
export async function migrateBefore(url: string, tagSuffix: string): Promise<void> {
  const folder = migrationsFolder();
  const journal = JSON.parse(readFileSync(join(folder, "meta", "_journal.json"), "utf8")) as {
    entries: Array<{ tag: string }>;
  };
  const index = journal.entries.findIndex((entry) => entry.tag.endsWith(tagSuffix));
  if (index <= 0) throw new Error(`no migration ${tagSuffix} after the first`);
  const entries = journal.entries.slice(0, index);
  const dir = mkdtempSync(join(tmpdir(), "migrations-"));
  try {
    mkdirSync(join(dir, "meta"));
    writeFileSync(join(dir, "meta", "_journal.json"), JSON.stringify({ ...journal, entries }));
    for (const { tag } of entries) copyFileSync(join(folder, `${tag}.sql`), join(dir, `${tag}.sql`));
    await migrateWith(url, dir);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Applies the migrations of `folder` (default: all of them) to the database at `url`. */
export async function migrateWith(url: string, folder = migrationsFolder()): Promise<void> {
  const sql = postgres(url, { max: 1, onnotice: () => {} });
  try {
    await migrate(drizzle(sql), { migrationsFolder: folder });
  } finally {
    await sql.end();
  }
}
