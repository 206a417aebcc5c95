import { createRoute } from "@hono/zod-openapi";
import { z } from "zod";
import { jsonContent } from "../../../http/openapi.js";
import { historyEntry, loadHistory } from "../../../messages/history.js";
import { defineRoute } from "../../types.js";
import { messageIdParams, noSuchMessage, oneMessageErrors } from "./one-message.js";

export const getMessageEvents = defineRoute({
  auth: "api-key",
  definition: createRoute({
    method: "get",
    path: "/api/v1/messages/{message_id}/events",
    tags: ["Messages"],
    summary: "Read a message's history",
    description:
      "Every event of the message in order: acceptance, each attempt, each scheduled retry with the " +
      "provider's error, and the outcome. The record's `status` and `retry_count` are the last event's.",
    request: { params: messageIdParams },
    responses: {
      200: {
        description: "The message's events, oldest first",
        content: jsonContent(z.object({ events: z.array(historyEntry).min(1) })),
      },
      ...oneMessageErrors,
    },
  }),
  async handler(c, deps) {
    const { message_id } = c.req.valid("param");
    // Every message has its accepted event, so no events means no such message in this organization.
    const events = await loadHistory(deps.store, c.get("organization").id, message_id);
    if (events.length === 0) throw noSuchMessage();
    return c.json({ events }, 200);
  },
});
