import { createRoute } from "@hono/zod-openapi";
import { z } from "zod";
import { templateName, templateRecord, toTemplateRecord } from "../../../channels/email/templates/schemas.js";
import { findTemplate } from "../../../channels/email/templates/store.js";
import { ApiError } from "../../errors.js";
import { API_KEY_ERRORS, errorResponses, jsonContent, SERVER_ERRORS } from "../../openapi.js";
import { defineRoute } from "../../types.js";

export const getTemplate = defineRoute({
  auth: "api-key",
  definition: createRoute({
    method: "get",
    path: "/api/v1/templates/{name}",
    tags: ["Templates"],
    summary: "Read an e-mail template",
    request: { params: z.object({ name: templateName }) },
    responses: {
      200: { description: "The template, with its content", content: jsonContent(templateRecord) },
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
    const template = await findTemplate(deps.db, c.get("organization").id, name);
    if (!template) throw new ApiError(404, "Template not found");
    return c.json(toTemplateRecord(template), 200);
  },
});
