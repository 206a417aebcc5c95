import { createRoute } from "@hono/zod-openapi";
import { jsonContent } from "../../../http/openapi.js";
import { defineRoute } from "../../types.js";
import { messageRecord, toMessageRecord } from "../../wire/message-record.js";
import { messageIdParams, noSuchMessage, oneMessageErrors } from "./one-message.js";

export const getMessage = defineRoute({
  auth: "api-key",
  definition: createRoute({
    method: "get",
    path: "/api/v1/messages/{message_id}",
    tags: ["Messages"],
    summary: "Read a message's record",
    request: { params: messageIdParams },
    responses: {
      200: { description: "The record, readable right after the 202", content: jsonContent(messageRecord) },
      ...oneMessageErrors,
    },
  }),
  async handler(c, deps) {
    const { message_id } = c.req.valid("param");
    const organization = c.get("organization");
    const row = await deps.store.findRecord(organization.id, message_id);
    if (!row) throw noSuchMessage();
    return c.json(toMessageRecord(row), 200);
  },
});
