import type { TestProject } from "vitest/node";
import { dropDatabase, ensureDatabase, runMigrations } from "../../db/migrate.js";

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

  return () => dropDatabase(url.toString());
}
