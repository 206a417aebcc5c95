import type { Context } from "hono";
import { HTTPException } from "hono/http-exception";
import type { ContentfulStatusCode } from "hono/utils/http-status";
import type { Logger } from "pino";
import { z } from "zod";
import { isDatabaseUnavailable, QueueRefusedError } from "../../db/errors.js";

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
