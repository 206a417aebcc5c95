import { createRoute } from "@hono/zod-openapi";
import { z } from "zod";
import { templateSummary, toTemplateSummary } from "../../../channels/email/templates/schemas.js";
import * as templateStore from "../../../channels/email/templates/store.js";
import { API_KEY_ERRORS, errorResponses, jsonContent, SERVER_ERRORS } from "../../../http/openapi.js";
import { defineRoute } from "../../types.js";

export const listTemplates = defineRoute({
  auth: "api-key",
  definition: createRoute({
    method: "get",
    path: "/api/v1/templates",
    tags: ["Templates"],
    summary: "List the organization's e-mail templates",
    description:
      "Every template, by name in byte (ASCII) order: digits, then upper case, then lower case. " +
      "Names and timestamps only; read a template for its content.",
    responses: {
      200: {
        description: "All the organization's templates; an empty list when it has none",
        content: jsonContent(z.object({ templates: z.array(templateSummary) })),
      },
      ...errorResponses(API_KEY_ERRORS, SERVER_ERRORS),
    },
  }),
  async handler(c, deps) {
    const rows = await templateStore.listTemplates(deps.db, c.get("organization").id);
    return c.json({ templates: rows.map(toTemplateSummary) }, 200);
  },
});
