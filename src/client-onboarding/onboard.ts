import { createRoute } from "@hono/zod-openapi";
import { z } from "zod";
import { ApiError } from "../http/errors.js";
import { parseJsonBody } from "../http/json-body.js";
import { errorResponses, JSON_BODY_ERRORS, jsonContent, SERVER_ERRORS } from "../http/openapi.js";
import { keyPrefix } from "../runtime/api-keys.js";
import { AppNameTakenError, registerClient } from "./clients.js";
import type { ClientOnboardingContext, ClientOnboardingDeps } from "./types.js";

export const ONBOARD_PATH = "/encryption-service/api/v1/onboard";

const requiredString = z.string({
  error: (issue) => (issue.input === undefined ? "is required" : "must be a string"),
});

const body = z.strictObject({
  appName: requiredString.trim().min(1, "must not be empty").max(100, "must be at most 100 characters"),
  contactEmail: requiredString
    .trim()
    .max(254, "must be at most 254 characters")
    .pipe(z.email("must be a valid e-mail address")),
});

const registeredClient = z
  .object({
    id: z.int(),
    apiKey: z.string().meta({ description: "`enc_…`: shown once; only its SHA-256 is stored" }),
    appName: z.string(),
    contactEmail: z.email(),
    createdAt: z.iso.datetime().meta({ description: "ISO 8601, UTC" }),
  })
  .meta({ id: "RegisteredClient" });

export const onboardRoute = createRoute({
  method: "post",
  path: ONBOARD_PATH,
  tags: ["Onboarding"],
  summary: "Register a client app",
  description: "Returns the app's API key, once. Rate-limited per client IP.",
  request: { body: { required: true, content: jsonContent(body) } },
  responses: {
    201: { description: "The registered app, with its API key", content: jsonContent(registeredClient) },
    ...errorResponses(
      { 400: "Malformed JSON, a field that breaks the schema, or an unknown field" },
      { 409: "The appName is taken (case-insensitive)" },
      JSON_BODY_ERRORS,
      { 429: "Too many onboarding requests from this client; retry after `Retry-After` seconds" },
      SERVER_ERRORS,
    ),
  },
});

/** POST /encryption-service/api/v1/onboard: registers a client app and returns its key, once. */
export async function onboardClient(
  c: ClientOnboardingContext,
  deps: ClientOnboardingDeps,
): Promise<Response> {
  // parseJsonBody reads only `c.req`, but is typed with the web API's context: widen ours.
  const input = await parseJsonBody(c, body);
  try {
    const client = await registerClient(deps.db, input);
    deps.logger.info(
      {
        clientId: client.id,
        appName: client.appName,
        apiKeyPrefix: keyPrefix(client.apiKey),
        requestId: c.get("requestId"),
      },
      "client onboarded",
    );
    // The response carries a secret: no cache may keep it.
    c.header("Cache-Control", "no-store");
    return c.json(
      {
        id: client.id,
        apiKey: client.apiKey,
        appName: client.appName,
        contactEmail: client.contactEmail,
        createdAt: client.createdAt.toISOString(),
      },
      201,
    );
  } catch (error) {
    if (error instanceof AppNameTakenError) {
      throw new ApiError(409, `An app named "${error.appName}" is already registered`);
    }
    throw error;
  }
}
