/** The fields of a Postgres (or connection) error that callers branch on. */
export interface PostgresErrorInfo {
  code: string;
  detail?: string;
  constraint_name?: string;
}

/**
 * Finds the driver's error behind whatever wraps it (drizzle wraps every failed query in a
 * `DrizzleQueryError` whose `cause` is postgres.js's error).
 */
export function postgresError(error: unknown): PostgresErrorInfo | undefined {
  let current: unknown = error;
  for (let depth = 0; depth < 5 && current && typeof current === "object"; depth++) {
    const code = (current as { code?: unknown }).code;
    if (typeof code === "string") return current as PostgresErrorInfo;
    current = (current as { cause?: unknown }).cause;
  }
  return undefined;
}

export const UNIQUE_VIOLATION = "23505";

export function isUniqueViolation(error: unknown): boolean {
  return postgresError(error)?.code === UNIQUE_VIOLATION;
}

/** 42P01: the statement names a table that does not exist (a day partition not made, or dropped). */
export function isUndefinedTable(error: unknown): boolean {
  return postgresError(error)?.code === "42P01";
}

/** SQLSTATE class 23, integrity constraint violation (unique, foreign key, check, not null…): the same statement fails again. */
export function isConstraintViolation(error: unknown): boolean {
  const code = postgresError(error)?.code;
  return code !== undefined && code.length === 5 && code.startsWith("23");
}

/** Node's and postgres.js's codes for a connection that could not be made, or was lost. */
const CONNECTION_LOST = new Set([
  "ECONNREFUSED",
  "ECONNRESET",
  "ETIMEDOUT",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "ENOTFOUND",
  "EAI_AGAIN",
  "EPIPE",
  "CONNECT_TIMEOUT",
  "CONNECTION_CLOSED",
  "CONNECTION_ENDED",
  "CONNECTION_DESTROYED",
]);

/** SQLSTATEs of a server that cannot do this now but likely can shortly, whatever the statement. */
const UNAVAILABLE_STATES = new Set([
  "25006", // read_only_sql_transaction: a failover left the connection on a standby
  "55P03", // lock_not_available: lock_timeout behind a migration's lock
  "57014", // query_canceled: statement_timeout, or an operator cancelling
  "57P01", // admin_shutdown
  "57P02", // crash_shutdown
  "57P03", // cannot_connect_now
]);

/** SQLSTATE classes that are unavailable as a whole: 08 connection exception, 53 insufficient resources. */
const UNAVAILABLE_CLASSES = new Set(["08", "53"]);

/**
 * Postgres cannot serve now, for a reason that is not the statement's: unreachable, refusing
 * connections, read-only, out of disk or memory, cancelling statements. The client should come
 * back shortly (503 + Retry-After); a batch that meets it is not run again one item at a time (each
 * item would meet it too); the worker pauses and holds what it could not record.
 */
export function isDatabaseUnavailable(error: unknown): boolean {
  const code = postgresError(error)?.code;
  if (code === undefined) return false;
  return (
    CONNECTION_LOST.has(code) ||
    UNAVAILABLE_STATES.has(code) ||
    (code.length === 5 && UNAVAILABLE_CLASSES.has(code.slice(0, 2)))
  );
}

/** An item refused without being run: `run` never saw it. */
export class QueueRefusedError extends Error {
  constructor(readonly reason: "queue_full" | "deadline_passed") {
    super(
      reason === "queue_full"
        ? "too many requests are waiting for the database"
        : "the request waited for the database past its deadline",
    );
  }
}
