import { createRoute } from "@hono/zod-openapi";
import { jsonContent } from "../../../http/openapi.js";
import { findWebhookEndpoint } from "../../../store/webhooks.js";
import { defineRoute } from "../../types.js";
import {
  endpointIdParams,
  noSuchEndpoint,
  oneEndpointErrors,
  toEndpointRecord,
  webhookEndpointRecord,
} from "./one-endpoint.js";

export const getWebhookEndpoint = defineRoute({
  auth: "api-key",
  definition: createRoute({
    method: "get",
    path: "/api/v1/webhooks/endpoints/{id}",
    tags: ["Webhooks"],
    summary: "Read a webhook endpoint",
    description: "Its settings and state (no secret: it is shown only when made).",
    request: { params: endpointIdParams },
    responses: {
      200: { description: "The endpoint", content: jsonContent(webhookEndpointRecord) },
      ...oneEndpointErrors(),
    },
  }),
  async handler(c, deps) {
    const { id } = c.req.valid("param");
    const endpoint = await findWebhookEndpoint(deps.db, c.get("organization").id, id);
    if (!endpoint) throw noSuchEndpoint();
    return c.json(toEndpointRecord(endpoint), 200);
  },
});
