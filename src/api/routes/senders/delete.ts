import { createRoute } from "@hono/zod-openapi";
import { deleteSender as deleteStoredSender } from "../../../store/senders.js";
import { defineRoute } from "../../types.js";
import { noSuchSender, oneSenderErrors, senderIdParams } from "./one-sender.js";

export const deleteSender = defineRoute({
  auth: "api-key",
  definition: createRoute({
    method: "delete",
    path: "/api/v1/senders/{id}",
    tags: ["Senders"],
    summary: "Delete a sender",
    description:
      "Sends from it are refused from then on (by every API process within `AUTH_CACHE_TTL_MS`); " +
      "messages already accepted are delivered. Registering it again starts a new verification.",
    request: { params: senderIdParams },
    responses: {
      204: { description: "Deleted; no body" },
      ...oneSenderErrors(),
    },
  }),
  async handler(c, deps) {
    const { id } = c.req.valid("param");
    const organizationId = c.get("organization").id;
    if (!(await deleteStoredSender(deps.db, organizationId, id))) throw noSuchSender();
    deps.senders.forget(organizationId);
    return c.body(null, 204);
  },
});
