import type { Context } from "hono";
import { HTTPException } from "hono/http-exception";
import type { ContentfulStatusCode } from "hono/utils/http-status";
import type { Logger } from "pino";
import { z } from "zod";
import { postgresError } from "../../db/errors.js";
import { QueueRefusedError } from "../micro-batch.js";

/** The one error type handlers throw; `onError` turns it into `{ "error": message }`. */
export class ApiError extends Error {
  constructor(
    readonly status: ContentfulStatusCode,
    message: string,
    readonly headers: Record<string, string> = {},
  ) {
    super(message);
  }
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

/** Readable one-line summary of zod issues: `payload.to: Invalid phone number; foo: Unrecognized key`. */
export function describeZodError(error: z.ZodError): string {
  return error.issues
    .slice(0, 5)
    .map((issue) => {
      const path = issue.path.join(".");
      return path ? `${path}: ${issue.message}` : issue.message;
    })
    .join("; ");
}

export function errorResponse(
  c: Context,
  status: ContentfulStatusCode,
  message: string,
  headers: Record<string, string> = {},
) {
  for (const [name, value] of Object.entries(headers)) c.header(name, value);
  return c.json({ error: message }, status);
}

/** The single error handler: every failure leaves as JSON `{ error }` with the right status. */
export function handleError(logger: Logger) {
  return function onError(error: Error, c: Context) {
    if (error instanceof ApiError) return errorResponse(c, error.status, error.message, error.headers);
    if (error instanceof z.ZodError) return errorResponse(c, 400, describeZodError(error));
    if (error instanceof HTTPException) {
      const status = error.status as ContentfulStatusCode;
      if (status >= 500) logger.error({ err: error, requestId: c.get("requestId") }, "request failed");
      // Keep the exception's own headers: basic auth's WWW-Authenticate is what makes a browser
      // ask for credentials.
      const headers = Object.fromEntries(error.getResponse().headers);
      delete headers["content-type"];
      delete headers["content-length"];
      const message = error.message || (status === 401 ? "Authentication required" : "Request failed");
      return errorResponse(c, status, message, headers);
    }
    if (error instanceof QueueRefusedError) {
      // Past its deadline, the request was answered 503 already, and that was logged.
      if (error.reason === "queue_full")
        logger.warn({ requestId: c.get("requestId") }, "too many requests waiting for the database: refused");
      return errorResponse(c, 503, "Service temporarily unavailable; retry shortly", { "Retry-After": "5" });
    }
    if (isDatabaseUnavailable(error)) {
      logger.error({ err: error, requestId: c.get("requestId") }, "database unavailable");
      return errorResponse(c, 503, "Service temporarily unavailable; retry shortly", { "Retry-After": "5" });
    }
    logger.error({ err: error, requestId: c.get("requestId") }, "unexpected error");
    return errorResponse(c, 500, "Internal server error");
  };
}
