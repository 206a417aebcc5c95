import { and, eq } from "drizzle-orm";
import { z } from "zod";
import { messages } from "../../db/schema.js";
import { uuidParam } from "../http/common-schemas.js";
import { ApiError } from "../http/errors.js";
import { parseParams } from "../http/json-body.js";
import type { Route } from "../http/types.js";
import { toMessageRecord } from "../messages/record.js";

const params = z.object({ message_id: uuidParam("message_id") });

export const getMessage: Route = {
  method: "get",
  path: "/api/v1/messages/:message_id",
  auth: "api-key",
  async handler(c, deps) {
    const { message_id } = parseParams(params, c.req.param());
    const organization = c.get("organization");
    const [row] = await deps.db
      .select()
      .from(messages)
      .where(and(eq(messages.messageId, message_id), eq(messages.organizationId, organization.id)))
      .limit(1);
    // Another organization's message is indistinguishable from an unknown one.
    if (!row) throw new ApiError(404, "Message not found");
    return c.json(toMessageRecord(row), 200);
  },
};
