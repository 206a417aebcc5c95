import type postgres from "postgres";
import type { Executor } from "./client.js";

/**
 * The postgres.js client under a drizzle handle or transaction. Hot paths write their SQL with it
 * directly: postgres.js prepares a statement once per connection, while drizzle builds the query
 * text anew on every call and sends it unprepared.
 */
export function driverOf(executor: Executor): postgres.Sql {
  return (executor._.session as unknown as { client: postgres.Sql }).client;
}
