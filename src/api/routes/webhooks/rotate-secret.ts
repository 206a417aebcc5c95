import { createRoute } from "@hono/zod-openapi";
import { jsonContent } from "../../../http/openapi.js";
import { rotateWebhookSecret } from "../../../messages/webhooks.js";
import { findWebhookEndpoint } from "../../../store/webhooks.js";
import { defineRoute } from "../../types.js";
import {
  endpointIdParams,
  noSuchEndpoint,
  oneEndpointErrors,
  toEndpointRecord,
  webhookDeps,
  webhookEndpointWithSecret,
} from "./one-endpoint.js";

export const rotateWebhookSecretRoute = defineRoute({
  auth: "api-key",
  definition: createRoute({
    method: "post",
    path: "/api/v1/webhooks/endpoints/{id}/rotate-secret",
    tags: ["Webhooks"],
    summary: "Give a webhook endpoint a new signing secret",
    description:
      "Answers with the new secret, shown in full only here. For 24 hours the secret it replaces " +
      "signs beside it: `webhook-signature` holds both signatures, space-separated, so a receiver " +
      "verifies with either while it changes over. A second rotation within that time ends the " +
      "first secret's grace at once.",
    request: { params: endpointIdParams },
    responses: {
      200: {
        description: "The endpoint and its new secret",
        content: jsonContent(webhookEndpointWithSecret),
      },
      ...oneEndpointErrors(),
    },
  }),
  async handler(c, deps) {
    const { id } = c.req.valid("param");
    const endpoint = await findWebhookEndpoint(deps.db, c.get("organization").id, id);
    const rotated = endpoint && (await rotateWebhookSecret(webhookDeps(deps), endpoint));
    if (!rotated) throw noSuchEndpoint();
    return c.json({ ...toEndpointRecord(rotated.endpoint), secret: rotated.secret }, 200);
  },
});
