import type { Context } from "hono";
import { HTTPException } from "hono/http-exception";
import type { ContentfulStatusCode } from "hono/utils/http-status";
import type { Logger } from "pino";
import { z } from "zod";
import { postgresError } from "../../db/errors.js";

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

/** Postgres is unreachable or refusing connections: the client should come back shortly. */
export function isDatabaseUnavailable(error: unknown): boolean {
  const code = postgresError(error)?.code;
  return (
    code !== undefined &&
    [
      "ECONNREFUSED",
      "ECONNRESET",
      "ETIMEDOUT",
      "EHOSTUNREACH",
      "ENOTFOUND",
      "CONNECT_TIMEOUT",
      "CONNECTION_CLOSED",
      "CONNECTION_ENDED",
      "CONNECTION_DESTROYED",
      "57P01", // admin_shutdown
      "57P02", // crash_shutdown
      "57P03", // cannot_connect_now
      "53300", // too_many_connections
    ].includes(code)
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
    if (isDatabaseUnavailable(error)) {
      logger.error({ err: error, requestId: c.get("requestId") }, "database unavailable");
      return errorResponse(c, 503, "Service temporarily unavailable; retry shortly", { "Retry-After": "5" });
    }
    logger.error({ err: error, requestId: c.get("requestId") }, "unexpected error");
    return errorResponse(c, 500, "Internal server error");
  };
}
