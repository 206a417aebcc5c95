import { createRoute } from "@hono/zod-openapi";
import { z } from "zod";
import { ApiError } from "../../errors.js";
import { API_KEY_ERRORS, errorResponses, jsonContent, SERVER_ERRORS } from "../../openapi.js";
import { defineRoute } from "../../types.js";
import { uuidParam } from "../../wire/common-schemas.js";
import { messageRecord, toMessageRecord } from "../../wire/message-record.js";

export const getMessage = defineRoute({
  auth: "api-key",
  definition: createRoute({
    method: "get",
    path: "/api/v1/messages/{message_id}",
    tags: ["Messages"],
    summary: "Read a message's record",
    request: { params: z.object({ message_id: uuidParam("message_id") }) },
    responses: {
      200: { description: "The record, readable right after the 202", content: jsonContent(messageRecord) },
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
    const organization = c.get("organization");
    const row = await deps.store.findRecord(organization.id, message_id);
    // Another organization's message is indistinguishable from an unknown one.
    if (!row) throw new ApiError(404, "Message not found");
    return c.json(toMessageRecord(row), 200);
  },
});
