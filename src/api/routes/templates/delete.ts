import { createRoute } from "@hono/zod-openapi";
import { z } from "zod";
import { templateName } from "../../../channels/email/templates/schemas.js";
import * as templateStore from "../../../channels/email/templates/store.js";
import { ApiError } from "../../errors.js";
import { API_KEY_ERRORS, errorResponses, SERVER_ERRORS } from "../../openapi.js";
import { defineRoute } from "../../types.js";

export const deleteTemplate = defineRoute({
  auth: "api-key",
  definition: createRoute({
    method: "delete",
    path: "/api/v1/templates/{name}",
    tags: ["Templates"],
    summary: "Delete an e-mail template",
    description:
      "The name is free again at once. Messages already accepted that name this template are rejected " +
      "when their delivery comes (templates are rendered at delivery, not at acceptance).",
    request: { params: z.object({ name: templateName }) },
    responses: {
      204: { description: "Deleted; no body" },
      ...errorResponses(
        { 400: "`name` is not a valid template name" },
        API_KEY_ERRORS,
        { 404: "No such template in the key's organization (another organization's looks the same)" },
        SERVER_ERRORS,
      ),
    },
  }),
  async handler(c, deps) {
    const { name } = c.req.valid("param");
    const deleted = await templateStore.deleteTemplate(deps.db, c.get("organization").id, name);
    if (!deleted) throw new ApiError(404, "Template not found");
    return c.body(null, 204);
  },
});
