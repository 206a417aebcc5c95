import { existsSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { drizzle } from "drizzle-orm/postgres-js";
import { migrate } from "drizzle-orm/postgres-js/migrator";
import postgres from "postgres";

/** The committed migrations, found from this file whether it runs from source or from dist/. */
export function migrationsFolder(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  while (!existsSync(join(dir, "package.json"))) {
    const parent = dirname(dir);
    if (parent === dir) throw new Error("cannot find the project root (package.json)");
    dir = parent;
  }
  return join(dir, "db", "migrations");
}

/** Creates the database named in `url` when it does not exist yet (local and test runs). */
export async function ensureDatabase(url: string): Promise<void> {
  const target = new URL(url);
  const name = decodeURIComponent(target.pathname.slice(1));
  const admin = new URL(url);
  admin.pathname = "/postgres";
  const sql = postgres(admin.toString(), { max: 1, onnotice: () => {} });
  try {
    const rows = await sql`select 1 from pg_database where datname = ${name}`;
    if (rows.length === 0) await sql.unsafe(`create database "${name.replaceAll('"', '""')}"`);
  } finally {
    await sql.end();
  }
}

/** Drops the database named in `url`, closing its connections (tests and benchmarks). */
export async function dropDatabase(url: string): Promise<void> {
  const name = decodeURIComponent(new URL(url).pathname.slice(1));
  const admin = new URL(url);
  admin.pathname = "/postgres";
  const sql = postgres(admin.toString(), { max: 1, onnotice: () => {} });
  try {
    await sql.unsafe(`drop database if exists "${name.replaceAll('"', '""')}" with (force)`);
  } finally {
    await sql.end();
  }
}

export async function runMigrations(url: string): Promise<void> {
  const sql = postgres(url, { max: 1, onnotice: () => {} });
  try {
    await migrate(drizzle(sql), { migrationsFolder: migrationsFolder() });
  } finally {
    await sql.end();
  }
}

const isMain = process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1];
if (isMain) {
  const url = process.env.DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/notifications";
  // Unset means production, as for every process: only a development or test run creates it.
  const create = process.env.NODE_ENV === "development" || process.env.NODE_ENV === "test";
  (create ? ensureDatabase(url) : Promise.resolve())
    .then(() => runMigrations(url))
    .then(() => console.log("migrations applied"))
    .catch((error: unknown) => {
      console.error("migration failed:", error instanceof Error ? error.message : error);
      process.exit(1);
    });
}
