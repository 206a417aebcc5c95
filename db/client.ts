import { drizzle, type PostgresJsDatabase } from "drizzle-orm/postgres-js";
import postgres from "postgres";
import * as schema from "./schema.js";

export type Database = PostgresJsDatabase<typeof schema>;
/** A database handle or an open transaction: data functions accept either. */
export type Executor = Database | Parameters<Parameters<Database["transaction"]>[0]>[0];

export interface DatabaseOptions {
  url: string;
  poolSize?: number;
  /** Seconds to wait for a connection before failing (fail fast on the request path). */
  connectTimeoutSeconds?: number;
}

export function createDatabase(options: DatabaseOptions): { db: Database; sql: postgres.Sql } {
  const sql = postgres(options.url, {
    max: options.poolSize ?? 10,
    connect_timeout: options.connectTimeoutSeconds ?? 5,
    idle_timeout: 60,
    onnotice: () => {},
  });
  return { db: drizzle(sql, { schema }), sql };
}
