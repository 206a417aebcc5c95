import { createRoute } from "@hono/zod-openapi";
import { templateRecord, toTemplateRecord } from "../../../channels/email/templates/schemas.js";
import { findTemplate } from "../../../channels/email/templates/store.js";
import { jsonContent } from "../../../http/openapi.js";
import { defineRoute } from "../../types.js";
import { noSuchTemplate, oneTemplateErrors, templateNameParams } from "./one-template.js";

export const getTemplate = defineRoute({
  auth: "api-key",
  definition: createRoute({
    method: "get",
    path: "/api/v1/templates/{name}",
    tags: ["Templates"],
    summary: "Read an e-mail template",
    request: { params: templateNameParams },
    responses: {
      200: { description: "The template, with its content", content: jsonContent(templateRecord) },
      ...oneTemplateErrors("`name` is not a valid template name"),
    },
  }),
  async handler(c, deps) {
    const { name } = c.req.valid("param");
    const template = await findTemplate(deps.db, c.get("organization").id, name);
    if (!template) throw noSuchTemplate();
    return c.json(toTemplateRecord(template), 200);
  },
});
