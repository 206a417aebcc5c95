import { createRoute } from "@hono/zod-openapi";
import { z } from "zod";
import { MAX_WEBHOOK_ENDPOINTS_PER_ORGANIZATION } from "../../../domain/webhooks.js";
import { ApiError } from "../../../http/errors.js";
import { parseJsonBody } from "../../../http/json-body.js";
import { API_KEY_ERRORS, errorResponses, jsonContent, SERVER_ERRORS } from "../../../http/openapi.js";
import { createWebhookEndpoint } from "../../../messages/webhooks.js";
import { defineRoute } from "../../types.js";
import {
  assertUrlAllowed,
  BODY_ERRORS,
  endpointFields,
  toEndpointRecord,
  webhookDeps,
  webhookEndpointWithSecret,
} from "./one-endpoint.js";

const body = z.strictObject({
  url: endpointFields.url,
  events: endpointFields.events.optional(),
  description: endpointFields.description.optional(),
  enabled: endpointFields.enabled.optional(),
});

export const createWebhookEndpointRoute = defineRoute({
  auth: "api-key",
  definition: createRoute({
    method: "post",
    path: "/api/v1/webhooks/endpoints",
    tags: ["Webhooks"],
    summary: "Register a status webhook endpoint",
    description:
      "Registers a URL to receive the organization's events, signed per Standard Webhooks 1.0, and " +
      "answers with its signing secret, shown in full only here. " +
      `An organization has at most ${MAX_WEBHOOK_ENDPOINTS_PER_ORGANIZATION} endpoints.`,
    request: { body: { required: true, content: jsonContent(body) } },
    responses: {
      201: { description: "Registered", content: jsonContent(webhookEndpointWithSecret) },
      ...errorResponses(
        { 400: "Malformed JSON, a field that breaks the schema, or an unknown field (named)" },
        API_KEY_ERRORS,
        { 409: `The organization has ${MAX_WEBHOOK_ENDPOINTS_PER_ORGANIZATION} endpoints already` },
        BODY_ERRORS,
        SERVER_ERRORS,
      ),
    },
  }),
  async handler(c, deps) {
    const request = await parseJsonBody(c, body);
    assertUrlAllowed(request.url, deps);
    const created = await createWebhookEndpoint(webhookDeps(deps), c.get("organization").id, {
      url: request.url,
      eventTypes: request.events ?? null,
      description: request.description ?? null,
      enabled: request.enabled ?? true,
    });
    if (created.outcome === "full") {
      throw new ApiError(
        409,
        `This organization has ${MAX_WEBHOOK_ENDPOINTS_PER_ORGANIZATION} webhook endpoints, the most it may have; delete one it no longer uses`,
      );
    }
    return c.json({ ...toEndpointRecord(created.endpoint), secret: created.secret }, 201);
  },
});
