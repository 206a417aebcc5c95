import { DrizzleQueryError } from "drizzle-orm/errors";
import pino, { type Logger } from "pino";
import postgres from "postgres";

export type { Logger };

/**
 * What of an error may be logged. drizzle wraps a failed query in an error whose message holds
 * the query's parameters (phone numbers, message bodies, e-mail addresses), and Postgres quotes
 * offending values in its own message and its `detail` and `where` fields (a JSON error quotes
 * the text around the fault); so for database errors, wrapped or straight from postgres.js, only
 * the name, code, constraint and message are kept, with quoted values that are not plain
 * identifiers (constraint or column names) redacted.
 */
export function loggableError(error: unknown): unknown {
  if (error instanceof Error && error.name === "ReplyError") return redisReplyError(error);
  if (!(error instanceof DrizzleQueryError) && !(error instanceof postgres.PostgresError)) return error;
  const cause = (error instanceof DrizzleQueryError ? error.cause : error) as
    | { name?: string; message?: string; code?: string; constraint_name?: string; stack?: string }
    | undefined;
  const message = (cause?.message ?? "database query failed").replace(
    /"([^"]*)"/g,
    (quoted, inner: string) => (/^[A-Za-z_][A-Za-z0-9_.]*$/.test(inner) ? quoted : '"[redacted]"'),
  );
  const safe = new Error(message);
  safe.name = cause?.name ?? "DatabaseError";
  Object.assign(safe, { code: cause?.code, constraint: cause?.constraint_name });
  safe.stack = `${safe.name}: ${message}\n${(cause?.stack ?? "").split("\n").slice(1).join("\n")}`;
  return safe;
}

/**
 * An ioredis reply error keeps its command, whose arguments hold a Lua script's whole text (for
 * BullMQ's scripts) and the keys and values written: only the name, the command's name and the
 * message's first line are logged.
 */
function redisReplyError(error: Error & { command?: unknown }): Error {
  const command = (error.command as { name?: unknown } | undefined)?.name;
  const safe = new Error(error.message.split("\n")[0] ?? "redis command failed");
  safe.name = error.name;
  Object.assign(safe, { command: typeof command === "string" ? command : undefined });
  safe.stack = `${safe.name}: ${safe.message}\n${(error.stack ?? "").split("\n").slice(1).join("\n")}`;
  return safe;
}

/** Structured JSON logs. Secrets and message content are redacted wherever they might appear. */
export function createLogger(options: { level: string; name: string }): Logger {
  return pino({
    name: options.name,
    level: options.level,
    serializers: { err: (error: unknown) => pino.stdSerializers.err(loggableError(error) as Error) },
    redact: {
      paths: [
        "apiKey",
        "*.apiKey",
        "headers['x-api-key']",
        "headers.authorization",
        "req.headers['x-api-key']",
        "req.headers.authorization",
        "body",
        "*.body",
      ],
      censor: "[redacted]",
    },
  });
}
