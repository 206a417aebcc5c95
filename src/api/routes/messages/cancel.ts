import { createRoute } from "@hono/zod-openapi";
import { ApiError } from "../../../http/errors.js";
import { errorResponses, jsonContent } from "../../../http/openapi.js";
import { cancelMessage } from "../../../messages/cancel.js";
import { defineRoute } from "../../types.js";
import { messageRecord, toMessageRecord } from "../../wire/message-record.js";
import { messageIdParams, noSuchMessage, oneMessageErrors } from "./one-message.js";

export const cancelMessageRoute = defineRoute({
  auth: "api-key",
  definition: createRoute({
    method: "post",
    path: "/api/v1/messages/{message_id}/cancel",
    tags: ["Messages"],
    summary: "Cancel a message before its first attempt",
    description:
      "A message whose first attempt has not started (a scheduled send waiting for its `send_at`, or one still " +
      "queued) becomes `rejected` with `status_reason` `canceled` (an event of its history, and a `message.rejected` " +
      "webhook) and is never sent. Canceling it again answers the same. Once an attempt has started: 409.",
    request: { params: messageIdParams },
    responses: {
      200: { description: "The canceled message's record", content: jsonContent(messageRecord) },
      ...oneMessageErrors,
      ...errorResponses({
        409: "The message's first attempt has started, or it is final otherwise: it can no longer be canceled",
      }),
    },
  }),
  async handler(c, deps) {
    const { message_id } = c.req.valid("param");
    const organizationId = c.get("organization").id;
    const result = await cancelMessage(deps, organizationId, message_id);
    switch (result.outcome) {
      case "not_found":
        throw noSuchMessage();
      case "too_late":
        throw new ApiError(
          409,
          `The message can no longer be canceled: its first attempt has started (status ${result.status})`,
        );
      case "canceled": {
        const row = await deps.store.findRecordAfterWrite(organizationId, message_id);
        if (!row) throw noSuchMessage();
        return c.json(toMessageRecord(row), 200);
      }
    }
  },
});
