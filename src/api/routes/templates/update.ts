import { createRoute } from "@hono/zod-openapi";
import { z } from "zod";
import { templateRecord, toTemplateRecord } from "../../../channels/email/templates/schemas.js";
import * as templateStore from "../../../channels/email/templates/store.js";
import { parseJsonBody } from "../../../http/json-body.js";
import { jsonContent } from "../../../http/openapi.js";
import { defineRoute } from "../../types.js";
import {
  assertRendersWithinBudget,
  contentFields,
  noSuchTemplate,
  oneTemplateErrors,
  SAVE_RENDER_ERRORS,
  storedContent,
  TEMPLATE_BODY,
  templateNameParams,
} from "./one-template.js";

// No `name`: a template's name is immutable, so sending one is an unknown field.
const body = z.strictObject(contentFields);

export const updateTemplate = defineRoute({
  auth: "api-key",
  maxBodyBytes: TEMPLATE_BODY.maxBytes,
  definition: createRoute({
    method: "put",
    path: "/api/v1/templates/{name}",
    tags: ["Templates"],
    summary: "Replace an e-mail template's content",
    description:
      "Replaces `code` and `text` (absent `text` becomes null). Messages not yet delivered are rendered with " +
      "the new content. `created_at` stays; `updated_at` moves.",
    request: {
      params: templateNameParams,
      body: { required: true, content: jsonContent(body) },
    },
    responses: {
      200: { description: "The template as now stored", content: jsonContent(templateRecord) },
      ...oneTemplateErrors(
        "A bad `name` in the path, malformed JSON, a field that breaks the schema, or an unknown field (named; `name` included)",
        TEMPLATE_BODY.errors,
        SAVE_RENDER_ERRORS,
      ),
    },
  }),
  async handler(c, deps) {
    const { name } = c.req.valid("param");
    const content = storedContent(await parseJsonBody(c, body));
    const organizationId = c.get("organization").id;
    await assertRendersWithinBudget(c, deps, name, content);
    const updated = await templateStore.updateTemplate(deps.db, organizationId, name, content, deps.now());
    if (!updated) throw noSuchTemplate();
    return c.json(toTemplateRecord(updated), 200);
  },
});
