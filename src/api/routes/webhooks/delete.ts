import { createRoute } from "@hono/zod-openapi";
import { deleteWebhookEndpoint as deleteStored } from "../../../store/webhooks.js";
import { defineRoute } from "../../types.js";
import { endpointIdParams, noSuchEndpoint, oneEndpointErrors } from "./one-endpoint.js";

export const deleteWebhookEndpoint = defineRoute({
  auth: "api-key",
  definition: createRoute({
    method: "delete",
    path: "/api/v1/webhooks/endpoints/{id}",
    tags: ["Webhooks"],
    summary: "Delete a webhook endpoint",
    description: "It receives nothing more; its attempts are deleted with it.",
    request: { params: endpointIdParams },
    responses: {
      204: { description: "Deleted; no body" },
      ...oneEndpointErrors(),
    },
  }),
  async handler(c, deps) {
    const { id } = c.req.valid("param");
    if (!(await deleteStored(deps.db, c.get("organization").id, id))) throw noSuchEndpoint();
    return c.body(null, 204);
  },
});
