import { createRoute } from "@hono/zod-openapi";
import { z } from "zod";
import { historyEntry, loadHistory } from "../../../messages/history.js";
import { ApiError } from "../../errors.js";
import { API_KEY_ERRORS, errorResponses, jsonContent, SERVER_ERRORS } from "../../openapi.js";
import { defineRoute } from "../../types.js";
import { uuidParam } from "../../wire/common-schemas.js";

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
    request: { params: z.object({ message_id: uuidParam("message_id") }) },
    responses: {
      200: {
        description: "The message's events, oldest first",
        content: jsonContent(z.object({ events: z.array(historyEntry).min(1) })),
      },
      ...errorResponses(
        { 400: "`message_id` is not a UUID" },
        API_KEY_ERRORS,
        { 404: "No such message in the key's organization (another organization's looks the same)" },
        SERVER_ERRORS,
      ),
    },
  }),
  async handler(c, deps) {
    const { message_id } = c.req.valid("param");
    // Every message has its accepted event, so no events means no such message in this organization.
    const events = await loadHistory(deps.store, c.get("organization").id, message_id);
    if (events.length === 0) throw new ApiError(404, "Message not found");
    return c.json({ events }, 200);
  },
});
