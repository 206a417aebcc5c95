import { createRoute } from "@hono/zod-openapi";
import { z } from "zod";
import { parseJsonBody } from "../../../http/json-body.js";
import { jsonContent } from "../../../http/openapi.js";
import { dropWaitingDeliveries, updateWebhookEndpoint } from "../../../store/webhooks.js";
import { defineRoute } from "../../types.js";
import {
  assertUrlAllowed,
  BODY_ERRORS,
  endpointFields,
  endpointIdParams,
  noSuchEndpoint,
  oneEndpointErrors,
  toEndpointRecord,
  webhookEndpointRecord,
} from "./one-endpoint.js";

const body = z.strictObject({
  url: endpointFields.url.optional(),
  events: endpointFields.events.optional(),
  description: endpointFields.description.optional(),
  enabled: endpointFields.enabled.optional(),
});

export const updateWebhookEndpointRoute = defineRoute({
  auth: "api-key",
  definition: createRoute({
    method: "patch",
    path: "/api/v1/webhooks/endpoints/{id}",
    tags: ["Webhooks"],
    summary: "Change a webhook endpoint",
    description:
      "Changes the fields given (`events: null`: every type). `enabled: true` re-enables an endpoint " +
      "the service disabled, clearing `disabled_reason` and its failing time; the events it missed " +
      "are not resumed (recover them with `POST …/recover`). `enabled: false` drops the events " +
      "waiting for it. A new `url` clears the failing time too.",
    request: { params: endpointIdParams, body: { required: true, content: jsonContent(body) } },
    responses: {
      200: { description: "The endpoint as now stored", content: jsonContent(webhookEndpointRecord) },
      ...oneEndpointErrors(
        {
          400: "A bad `id`, malformed JSON, a field that breaks the schema, or an unknown field (named)",
        },
        BODY_ERRORS,
      ),
    },
  }),
  async handler(c, deps) {
    const { id } = c.req.valid("param");
    const request = await parseJsonBody(c, body);
    if (request.url !== undefined) assertUrlAllowed(request.url, deps);
    const organizationId = c.get("organization").id;
    const updated = await deps.db.transaction(async (tx) => {
      const row = await updateWebhookEndpoint(tx, organizationId, id, {
        ...(request.url !== undefined && { url: request.url, failingSince: null }),
        ...(request.events !== undefined && { eventTypes: request.events }),
        ...(request.description !== undefined && { description: request.description }),
        ...(request.enabled !== undefined && { enabled: request.enabled, disabledReason: null }),
        // Re-enabled (or moved): it starts afresh, not disabled again by its next failure.
        ...((request.enabled === true || request.url !== undefined) && { failingSince: null }),
        updatedAt: deps.now(),
      });
      // Disabled by its organization: what waited for it is dropped, as when the service disables it.
      if (row && request.enabled === false) await dropWaitingDeliveries(tx, row.id);
      return row;
    });
    if (!updated) throw noSuchEndpoint();
    return c.json(toEndpointRecord(updated), 200);
  },
});
