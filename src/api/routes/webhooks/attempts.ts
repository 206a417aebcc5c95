import { createRoute } from "@hono/zod-openapi";
import { z } from "zod";
import { jsonContent } from "../../../http/openapi.js";
import { findWebhookEndpoint, pageOfWebhookAttempts } from "../../../store/webhooks.js";
import { defineRoute } from "../../types.js";
import {
  cursorAfter,
  endpointIdParams,
  nextCursor,
  noSuchEndpoint,
  oneEndpointErrors,
  pageQuery,
  toAttemptRecord,
  webhookAttemptRecord,
} from "./one-endpoint.js";

export const listWebhookAttempts = defineRoute({
  auth: "api-key",
  definition: createRoute({
    method: "get",
    path: "/api/v1/webhooks/endpoints/{id}/attempts",
    tags: ["Webhooks"],
    summary: "List a webhook endpoint's delivery attempts",
    description:
      "Newest first, a page at a time: each POST, its event (`event_id` is the `webhook-id`), status, " +
      "duration and error; after a failure, when the event is tried again (`next_retry_at`) or that it " +
      "was given up (`gave_up`: retries spent, or the endpoint disabled).",
    request: { params: endpointIdParams, query: pageQuery },
    responses: {
      200: {
        description: "One page; `next_cursor` is null on the last page",
        content: jsonContent(z.object({ attempts: z.array(webhookAttemptRecord), next_cursor: nextCursor })),
      },
      ...oneEndpointErrors({ 400: "A bad `id`, `limit` or `cursor`, or an unknown query parameter" }),
    },
  }),
  async handler(c, deps) {
    const { id } = c.req.valid("param");
    const { limit, cursor } = c.req.valid("query");
    const organizationId = c.get("organization").id;
    if (!(await findWebhookEndpoint(deps.db, organizationId, id))) throw noSuchEndpoint();
    const rows = await pageOfWebhookAttempts(deps.db, organizationId, id, limit, cursor);
    return c.json({ attempts: rows.map(toAttemptRecord), next_cursor: cursorAfter(rows, limit) }, 200);
  },
});
