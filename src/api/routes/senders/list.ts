import { createRoute } from "@hono/zod-openapi";
import { z } from "zod";
import { API_KEY_ERRORS, errorResponses, jsonContent, SERVER_ERRORS } from "../../../http/openapi.js";
import { listSenders as storedSenders } from "../../../store/senders.js";
import { defineRoute } from "../../types.js";
import { senderRecord, toSenderRecord } from "./one-sender.js";

export const listSenders = defineRoute({
  auth: "api-key",
  definition: createRoute({
    method: "get",
    path: "/api/v1/senders",
    tags: ["Senders"],
    summary: "List the organization's senders",
    description: "Its e-mail domains and SMS sender ids, pending or verified, oldest first.",
    responses: {
      200: {
        description: "Every sender of the organization; an empty list when it has none",
        content: jsonContent(z.object({ senders: z.array(senderRecord) })),
      },
      ...errorResponses(API_KEY_ERRORS, SERVER_ERRORS),
    },
  }),
  async handler(c, deps) {
    const senders = await storedSenders(deps.db, c.get("organization").id);
    return c.json({ senders: senders.map(toSenderRecord) }, 200);
  },
});
