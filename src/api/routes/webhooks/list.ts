import { createRoute } from "@hono/zod-openapi";
import { z } from "zod";
import { API_KEY_ERRORS, errorResponses, jsonContent, SERVER_ERRORS } from "../../../http/openapi.js";
import { pageOfWebhookEndpoints } from "../../../store/webhooks.js";
import { defineRoute } from "../../types.js";
import {
  cursorAfter,
  nextCursor,
  pageQuery,
  toEndpointRecord,
  webhookEndpointRecord,
} from "./one-endpoint.js";

export const listWebhookEndpoints = defineRoute({
  auth: "api-key",
  definition: createRoute({
    method: "get",
    path: "/api/v1/webhooks/endpoints",
    tags: ["Webhooks"],
    summary: "List the organization's webhook endpoints",
    description: "Oldest first, a page at a time (no secrets).",
    request: { query: pageQuery },
    responses: {
      200: {
        description: "One page; `next_cursor` is null on the last page",
        content: jsonContent(
          z.object({ endpoints: z.array(webhookEndpointRecord), next_cursor: nextCursor }),
        ),
      },
      ...errorResponses(
        { 400: "A bad `limit` or `cursor`, or an unknown query parameter" },
        API_KEY_ERRORS,
        SERVER_ERRORS,
      ),
    },
  }),
  async handler(c, deps) {
    const { limit, cursor } = c.req.valid("query");
    const rows = await pageOfWebhookEndpoints(deps.db, c.get("organization").id, limit, cursor);
    return c.json({ endpoints: rows.map(toEndpointRecord), next_cursor: cursorAfter(rows, limit) }, 200);
  },
});
