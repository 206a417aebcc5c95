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

/** SQLSTATE class 23, integrity constraint violation (unique, foreign key, check, not null…): the same statement fails again. */
export function isConstraintViolation(error: unknown): boolean {
  const code = postgresError(error)?.code;
  return code !== undefined && code.length === 5 && code.startsWith("23");
}
