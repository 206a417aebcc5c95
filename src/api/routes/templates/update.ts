import { createRoute } from "@hono/zod-openapi";
import { z } from "zod";
import {
  MAX_TEMPLATE_BODY_BYTES,
  templateCode,
  templateName,
  templateRecord,
  templateText,
  toTemplateRecord,
} from "../../../channels/email/templates/schemas.js";
import * as templateStore from "../../../channels/email/templates/store.js";
import { ApiError } from "../../errors.js";
import { parseJsonBody } from "../../json-body.js";
import { API_KEY_ERRORS, errorResponses, jsonBodyErrors, jsonContent, SERVER_ERRORS } from "../../openapi.js";
import { defineRoute } from "../../types.js";

// No `name`: a template's name is immutable, so sending one is an unknown field.
const body = z.strictObject({ code: templateCode, text: templateText });

export const updateTemplate = defineRoute({
  auth: "api-key",
  maxBodyBytes: MAX_TEMPLATE_BODY_BYTES,
  definition: createRoute({
    method: "put",
    path: "/api/v1/templates/{name}",
    tags: ["Templates"],
    summary: "Replace an e-mail template's content",
    description:
      "Replaces `code` and `text` (absent `text` becomes null). Messages not yet delivered are rendered with " +
      "the new content. `created_at` stays; `updated_at` moves.",
    request: {
      params: z.object({ name: templateName }),
      body: { required: true, content: jsonContent(body) },
    },
    responses: {
      200: { description: "The template as now stored", content: jsonContent(templateRecord) },
      ...errorResponses(
        {
          400: "A bad `name` in the path, malformed JSON, a field that breaks the schema, or an unknown field (named; `name` included)",
        },
        API_KEY_ERRORS,
        { 404: "No such template in the key's organization (another organization's looks the same)" },
        jsonBodyErrors(MAX_TEMPLATE_BODY_BYTES),
        SERVER_ERRORS,
      ),
    },
  }),
  async handler(c, deps) {
    const { name } = c.req.valid("param");
    const { code, text } = await parseJsonBody(c, body);
    const updated = await templateStore.updateTemplate(
      deps.db,
      c.get("organization").id,
      name,
      { code, text: text ?? null },
      deps.now(),
    );
    if (!updated) throw new ApiError(404, "Template not found");
    return c.json(toTemplateRecord(updated), 200);
  },
});
