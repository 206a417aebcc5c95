import postgres from "postgres";
import type { TestProject } from "vitest/node";
import { ensureDatabase, runMigrations } from "../../db/migrate.js";

declare module "vitest" {
  export interface ProvidedContext {
    databaseUrl: string;
  }
}

/** Each run gets a database of its own, created and migrated here and dropped at the end. */
export default async function setup(project: TestProject) {
  const base = new URL(process.env.TEST_DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/postgres");
  const name = `ntf_test_${Date.now()}_${process.pid}`;
  const url = new URL(base);
  url.pathname = `/${name}`;
  await ensureDatabase(url.toString());
  await runMigrations(url.toString());
  project.provide("databaseUrl", url.toString());

  return async () => {
    const admin = new URL(base);
    admin.pathname = "/postgres";
    const sql = postgres(admin.toString(), { max: 1, onnotice: () => {} });
    try {
      await sql.unsafe(`drop database if exists "${name}" with (force)`);
    } finally {
      await sql.end();
    }
  };
}
