import { drizzle, type PostgresJsDatabase } from "drizzle-orm/postgres-js";
import postgres from "postgres";
import * as schema from "./schema.js";

export type Database = PostgresJsDatabase<typeof schema>;
/** A database handle or an open transaction: data functions accept either. */
export type Executor = Database | Parameters<Parameters<Database["transaction"]>[0]>[0];
/**
 * The postgres.js client under the drizzle handle ({@link createDatabase}), or one of its
 * transactions. The hot paths write their SQL with it: postgres.js prepares a tagged template's
 * statement once per connection, while drizzle builds the query text anew on every call and
 * sends it unprepared. Drizzle has turned the client's own JSON and date serialisation off, so
 * those statements pass JSON as text and read dates as text or numbers.
 */
export type SqlClient = postgres.ISql;

export interface DatabaseOptions {
  url: string;
  poolSize?: number;
  /** Seconds to wait for a connection before failing (fail fast on the request path). */
  connectTimeoutSeconds?: number;
  /** Postgres cancels a statement that runs longer (`statement_timeout`); none when unset. */
  statementTimeoutMs?: number;
  /**
   * Seconds between attempts to reconnect after a connection failed; unset: postgres.js's
   * backoff, which grows to 20 s while the server stays away (queries wait meanwhile).
   */
  reconnectDelaySeconds?: number;
  /** Called with the text of each statement sent (tests count them). */
  onQuery?: (query: string) => void;
}

export function createDatabase(options: DatabaseOptions): { db: Database; sql: postgres.Sql } {
  const sql = postgres(options.url, {
    max: options.poolSize ?? 10,
    connect_timeout: options.connectTimeoutSeconds ?? 5,
    idle_timeout: 60,
    ...(options.reconnectDelaySeconds !== undefined && { backoff: () => options.reconnectDelaySeconds ?? 0 }),
    onnotice: () => {},
    ...(options.statementTimeoutMs !== undefined && {
      connection: { statement_timeout: options.statementTimeoutMs },
    }),
    debug: options.onQuery && ((_connection, query) => options.onQuery?.(query)),
  });
  return { db: drizzle(sql, { schema }), sql };
}
