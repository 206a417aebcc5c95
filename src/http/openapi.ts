import type { OpenAPIHono, RouteConfig } from "@hono/zod-openapi";
import type { Env, Handler, MiddlewareHandler } from "hono";
import { z } from "zod";
import { serveApiReference } from "./api-docs.js";
import { ApiError, describeZodError } from "./errors.js";
import { MAX_BODY_BYTES } from "./json-body.js";
import { requestHeader } from "./node-request.js";

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

/**
 * The fields of the IETF draft "RateLimit Fields for HTTP" (draft-ietf-httpapi-ratelimit-headers-06)
 * that every answer of a rate-limited route carries once the request has passed its limits.
 */
export const RATE_LIMIT_HEADERS = {
  "RateLimit-Limit": {
    description:
      "The quota of the limit closest to exhaustion for this organization (requests per window; the bucket's size for a rate)",
    schema: { type: "integer" as const },
  },
  "RateLimit-Remaining": {
    description: "What is left of that quota after this request",
    schema: { type: "integer" as const },
  },
  "RateLimit-Reset": {
    description: "Seconds until that quota is whole again (for the daily quota: until the next UTC midnight)",
    schema: { type: "integer" as const },
  },
  "RateLimit-Policy": {
    description:
      "Every limit of this route: `<quota>;w=<window seconds>`, comma-separated (e.g. `200;w=2, 100000;w=86400`)",
    schema: { type: "string" as const },
  },
};

/** Statuses answered before a route's limits run (body size, authentication): they carry no RateLimit fields. */
const BEFORE_LIMITS = new Set(["401", "403", "413"]);

/** A rate-limited route's definition, with the RateLimit fields on every answer that passes the limits. */
export function withRateLimitHeaders<R extends RouteConfig>(definition: R): R {
  if (!definition.responses["429"])
    throw new Error(`${definition.method} ${definition.path}: a limited route documents its 429`);
  const responses: RouteConfig["responses"] = {};
  for (const [status, response] of Object.entries(definition.responses)) {
    responses[status] =
      BEFORE_LIMITS.has(status) || "$ref" in response
        ? response
        : { ...response, headers: { ...(response.headers as object | undefined), ...RATE_LIMIT_HEADERS } };
  }
  return { ...definition, responses };
}

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

/**
 * The error responses of an API-key route naming one resource by its UUID `id`: `noun` is what
 * the 404 says is missing (another organization's looks the same); `others` add to them or say more.
 */
export function oneByIdErrors(noun: string, ...others: ErrorDescriptions[]) {
  return errorResponses(
    { 400: "`id` is not a UUID" },
    API_KEY_ERRORS,
    { 404: `No such ${noun} in the key's organization (another organization's looks the same)` },
    SERVER_ERRORS,
    ...others,
  );
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
 * The path, query and header parameters are validated by {@link validateParameters}, after
 * `middleware` (so authentication comes first), and read in the handler with `c.req.valid(...)`
 * as usual. The JSON body is declared for the document only: the handler reads it with
 * `parseJsonBody`, because zod-openapi's own body validator answers other content types
 * differently (415 "Unsupported Media Type" for a declared-but-wrong type, schema errors instead
 * of 415 when the header is missing, "Malformed JSON in request body", `application/*+json`
 * accepted) and would parse the body a second time.
 */
export function openapiRoute<E extends Env>(
  app: OpenAPIHono<E>,
  definition: RouteConfig,
  middleware: MiddlewareHandler<E>[],
  handler: Handler<E>,
): void {
  app.openAPIRegistry.registerPath(definition);
  const chain = [...middleware, validateParameters(definition.request ?? {})];
  app.openapi({ ...definition, request: {}, middleware: chain, hide: true }, handler as never);
}

/**
 * Validates a route's documented parameters with their zod schemas and hands the results to
 * `c.req.valid("param" | "query" | "header")`; any failure is a 400 (see {@link validationHook}).
 * It does what zod-openapi's validators do, minus their cost: hono's `validator` reads the
 * Content-Type of every request it sees through `c.req.header()`, which makes node-server copy
 * all the headers into a WHATWG `Headers` (see node-request.ts), and the header target copies
 * them all again. Here a header schema's own keys are read, and nothing else.
 */
function validateParameters(request: NonNullable<RouteConfig["request"]>): MiddlewareHandler {
  const { params, query, headers } = request;
  const headerNames = headers instanceof z.ZodObject ? Object.keys(headers.shape) : [];
  if (headers && headerNames.length === 0) throw new Error("header parameters must be one z.object");
  return async function validateRouteParameters(c, next) {
    if (params) c.req.addValidatedData("param", parsed(params, c.req.param()));
    if (query) c.req.addValidatedData("query", parsed(query, queryValues(c.req.queries())));
    if (headers) {
      const values = Object.fromEntries(
        headerNames.map((name) => [name, requestHeader(c, name.toLowerCase())]),
      );
      c.req.addValidatedData("header", parsed(headers as z.ZodType, values));
    }
    await next();
  };
}

function parsed(schema: z.ZodType, value: unknown): object {
  const result = schema.safeParse(value);
  validationHook(result);
  return result.data as object;
}

/** A query string's values as hono's validator gives them: a string, or an array when repeated. */
function queryValues(queries: Record<string, string[]>): Record<string, string | string[]> {
  const values: Record<string, string | string[]> = {};
  for (const [key, list] of Object.entries(queries))
    values[key] = list.length === 1 ? (list[0] as string) : list;
  return values;
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
