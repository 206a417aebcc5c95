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
  return cleaned(error, 0);
}

function cleaned(error: unknown, depth: number): unknown {
  if (!(error instanceof Error)) return error;
  if (error instanceof DrizzleQueryError || error instanceof postgres.PostgresError) {
    return databaseError(error);
  }
  if (error.name === "ReplyError") return redisReplyError(error, depth);
  return withoutCommandArguments(error, depth);
}

/**
 * Any error, whatever its name, with no command's arguments in it or in the errors it carries:
 * ioredis hangs the failed AUTH's reply error (whose `command.args` hold the password) on a
 * cluster's `ClusterAllFailedError` as `lastNodeError`, and errors nest as `cause`,
 * `previousErrors` (BullMQ, ioredis) and `errors` (AggregateError). pino's serializer walks into
 * every one of them, so each is cleaned the same way, a few levels deep.
 */
function withoutCommandArguments(error: Error, depth: number): Error {
  const record = error as unknown as Record<string, unknown>;
  const nested = Object.keys(record).some((key) => key === "command" || carriesErrors(record[key]));
  if (!nested && !(error.cause instanceof Error)) return error;
  const safe = Object.create(Object.getPrototypeOf(error) as object) as Error & Record<string, unknown>;
  for (const key of Object.keys(record)) {
    const value = record[key];
    safe[key] =
      key === "command"
        ? commandName(value)
        : depth >= 4 && carriesErrors(value)
          ? "[nested errors left out]"
          : Array.isArray(value)
            ? value.map((item) => cleaned(item, depth + 1))
            : cleaned(value, depth + 1);
  }
  for (const key of ["name", "message", "stack"] as const) {
    Object.defineProperty(safe, key, {
      value: error[key],
      enumerable: false,
      writable: true,
      configurable: true,
    });
  }
  if (error.cause !== undefined) {
    Object.defineProperty(safe, "cause", {
      value: depth >= 4 ? undefined : cleaned(error.cause, depth + 1),
      enumerable: false,
      writable: true,
      configurable: true,
    });
  }
  return safe;
}

function carriesErrors(value: unknown): boolean {
  return value instanceof Error || (Array.isArray(value) && value.some((item) => item instanceof Error));
}

function commandName(command: unknown): string | undefined {
  const name = (command as { name?: unknown } | undefined)?.name;
  return typeof name === "string" ? name : undefined;
}

function databaseError(error: DrizzleQueryError | InstanceType<typeof postgres.PostgresError>): Error {
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
function redisReplyError(error: Error & { command?: unknown }, depth: number): Error {
  const safe = new Error(error.message.split("\n")[0] ?? "redis command failed");
  safe.name = error.name;
  Object.assign(safe, { command: commandName(error.command) });
  if (error.cause !== undefined && depth < 4) safe.cause = cleaned(error.cause, depth + 1);
  safe.stack = `${safe.name}: ${safe.message}\n${(error.stack ?? "").split("\n").slice(1).join("\n")}`;
  return safe;
}

/**
 * Structured JSON logs. Secrets and message content are redacted wherever they might appear.
 * `destination`: where the lines go (standard output unless a test reads them).
 */
export function createLogger(
  options: { level: string; name: string },
  destination?: pino.DestinationStream,
): Logger {
  const settings: pino.LoggerOptions = {
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
  };
  return destination ? pino(settings, destination) : pino(settings);
}
