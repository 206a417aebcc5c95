import { createRoute } from "@hono/zod-openapi";
import { z } from "zod";
import { templateName, templateRecord, toTemplateRecord } from "../../../channels/email/templates/schemas.js";
import * as templateStore from "../../../channels/email/templates/store.js";
import { ApiError } from "../../../http/errors.js";
import { parseJsonBody } from "../../../http/json-body.js";
import { API_KEY_ERRORS, errorResponses, jsonContent, SERVER_ERRORS } from "../../../http/openapi.js";
import { defineRoute } from "../../types.js";
import {
  assertRendersWithinBudget,
  contentFields,
  SAVE_RENDER_ERRORS,
  storedContent,
  TEMPLATE_BODY,
} from "./one-template.js";

const body = z.strictObject({ name: templateName, ...contentFields });

export const createTemplate = defineRoute({
  auth: "api-key",
  maxBodyBytes: TEMPLATE_BODY.maxBytes,
  definition: createRoute({
    method: "post",
    path: "/api/v1/templates",
    tags: ["Templates"],
    summary: "Create an e-mail template",
    description:
      "Stores HTML with `mc:edit` regions and merge tags, as written; it is rendered when an e-mail naming it " +
      "(`template_name`) is delivered. The name is unique within the organization and cannot change.",
    request: { body: { required: true, content: jsonContent(body) } },
    responses: {
      201: { description: "The template as stored", content: jsonContent(templateRecord) },
      ...errorResponses(
        {
          400: "Malformed JSON, a field that breaks the schema (a bad `name`, an empty or oversized `code` or `text`), or an unknown field (named)",
        },
        API_KEY_ERRORS,
        {
          409: "The organization already has a template of that name, or as many templates as it may have (`TEMPLATE_MAX_PER_ORGANIZATION`)",
        },
        SAVE_RENDER_ERRORS,
        TEMPLATE_BODY.errors,
        SERVER_ERRORS,
      ),
    },
  }),
  async handler(c, deps) {
    const { name, ...content } = await parseJsonBody(c, body);
    const template = { name, ...storedContent(content) };
    await assertRendersWithinBudget(c, deps, name, template);
    const max = deps.config.TEMPLATE_MAX_PER_ORGANIZATION;
    const outcome = await templateStore.createTemplateWithinLimit(
      deps.db,
      c.get("organization").id,
      template,
      deps.now(),
      max,
    );
    if (outcome === "exists") throw new ApiError(409, `A template named "${name}" already exists`);
    if (outcome === "limit_reached") {
      throw new ApiError(
        409,
        `The organization already has ${max} templates, the most it may have; delete one first`,
      );
    }
    return c.json(toTemplateRecord(outcome.created), 201);
  },
});
