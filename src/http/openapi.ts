import type { OpenAPIHono, RouteConfig } from "@hono/zod-openapi";
import type { Env, Handler, MiddlewareHandler } from "hono";
import { z } from "zod";
import { serveApiReference } from "./api-docs.js";
import { ApiError, describeZodError } from "./errors.js";
import { MAX_BODY_BYTES } from "./json-body.js";

/** The body of every error response, on every path. */
export const errorBody = z
  .object({ error: z.string().meta({ description: "A readable message; never internals" }) })
  .meta({ id: "Error" });

/** Statuses an error response can have; the README's error table says when each happens. */
export type ErrorStatus = 400 | 401 | 403 | 404 | 409 | 413 | 415 | 422 | 429 | 500 | 503;
type ErrorDescriptions = Partial<Record<ErrorStatus, string>>;

export const API_KEY_ERRORS = {
  401: "`x-api-key` missing, malformed, unknown or revoked (one identical body for all four)",
  403: "The key's organization is inactive",
} satisfies ErrorDescriptions;

/** 413 and 415 of a route reading a JSON body of at most `maxBytes`. */
export function jsonBodyErrors(maxBytes: number) {
  return {
    413: `Body over ${maxBytes / 1024} KiB`,
    415: "A body that is not `application/json`",
  } satisfies ErrorDescriptions;
}

export const JSON_BODY_ERRORS = jsonBodyErrors(MAX_BODY_BYTES);

export const SERVER_ERRORS = {
  500: "Unexpected error (logged with the request id; no internals in the body)",
  503: "Postgres unavailable; retry after `Retry-After` seconds",
} satisfies ErrorDescriptions;

const retryAfter = {
  "Retry-After": { description: "Seconds to wait before retrying", schema: { type: "integer" as const } },
};

/** `{ error }` responses, one per status, from one or more groups of descriptions. */
export function errorResponses(...groups: ErrorDescriptions[]) {
  const responses: RouteConfig["responses"] = {};
  for (const [status, description] of Object.entries(Object.assign({}, ...groups) as ErrorDescriptions)) {
    responses[status] = {
      description,
      content: jsonContent(errorBody),
      ...(status === "429" || status === "503" ? { headers: retryAfter } : {}),
    };
  }
  return responses;
}

/** `content` of a JSON request body or response. */
export function jsonContent(schema: z.ZodType) {
  return { "application/json": { schema } };
}

/** zod-openapi's parameter validation failures become the same 400 as every other bad input. */
export function validationHook(result: { success: true } | { success: false; error: z.ZodError }): void {
  if (!result.success) throw new ApiError(400, describeZodError(result.error));
}

/**
 * Serves `definition` on `app` and adds it, as written, to the app's OpenAPI document.
 *
 * zod-openapi validates the path, query and header parameters (failures reach
 * {@link validationHook}, after `middleware`, so authentication comes first). The JSON body is
 * declared for the document only: the handler reads it with `parseJsonBody`, because zod-openapi's
 * own body validator answers other content types differently (415 "Unsupported Media Type" for a
 * declared-but-wrong type, schema errors instead of 415 when the header is missing, "Malformed
 * JSON in request body", `application/*+json` accepted) and would parse the body a second time.
 */
export function openapiRoute<E extends Env>(
  app: OpenAPIHono<E>,
  definition: RouteConfig,
  middleware: MiddlewareHandler<E>[],
  handler: Handler<E>,
): void {
  app.openAPIRegistry.registerPath(definition);
  const { body: _documentedOnly, ...validated } = definition.request ?? {};
  app.openapi({ ...definition, request: validated, middleware, hide: true }, handler as never);
}

/**
 * `GET /openapi.json` (OpenAPI 3.1, built once, on first request, from the registered routes)
 * and `GET /docs` (an interactive reference that reads it; see api-docs.ts).
 */
export function serveDocs<E extends Env>(app: OpenAPIHono<E>, info: { title: string; description: string }) {
  let document: ReturnType<OpenAPIHono<E>["getOpenAPI31Document"]> | undefined;
  app.get("/openapi.json", (c) => {
    document ??= app.getOpenAPI31Document({
      openapi: "3.1.0",
      info: { ...info, version: "1.0" },
      // Relative: the server the document was fetched from, whatever proxy is in front of it.
      servers: [{ url: "/", description: "This server" }],
    });
    return c.json(document);
  });
  serveApiReference(app, info.title);
}
