import { createRoute } from "@hono/zod-openapi";
import * as templateStore from "../../../channels/email/templates/store.js";
import { defineRoute } from "../../types.js";
import { noSuchTemplate, oneTemplateErrors, templateNameParams } from "./one-template.js";

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
    request: { params: templateNameParams },
    responses: {
      204: { description: "Deleted; no body" },
      ...oneTemplateErrors("`name` is not a valid template name"),
    },
  }),
  async handler(c, deps) {
    const { name } = c.req.valid("param");
    const deleted = await templateStore.deleteTemplate(deps.db, c.get("organization").id, name);
    if (!deleted) throw noSuchTemplate();
    return c.body(null, 204);
  },
});
