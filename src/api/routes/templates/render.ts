import { createRoute } from "@hono/zod-openapi";
import { z } from "zod";
import { TemplateRenderError } from "../../../channels/email/templates/render-error.js";
import {
  RENDER_DEADLINE_MS,
  RENDER_HEAP_MB,
  renderSandbox,
} from "../../../channels/email/templates/sandbox.js";
import {
  emailSubject,
  globalMergeVars,
  mergeLanguage,
  templateContent,
} from "../../../channels/email/templates/schemas.js";
import { findTemplate } from "../../../channels/email/templates/store.js";
import { ApiError } from "../../../http/errors.js";
import { parseJsonBody } from "../../../http/json-body.js";
import { JSON_BODY_ERRORS, jsonContent } from "../../../http/openapi.js";
import { defineRoute } from "../../types.js";
import {
  noSuchTemplate,
  oneTemplateErrors,
  renderOptionsFor,
  renderRefusal,
  templateNameParams,
} from "./one-template.js";

const body = z.strictObject({
  subject: emailSubject
    .optional()
    .meta({ description: "A subject to render with the template; none: empty" }),
  template_content: templateContent,
  merge_language: mergeLanguage,
  global_merge_vars: globalMergeVars,
});

const rendered = z
  .object({
    subject: z.string(),
    html: z.string(),
    text: z.string().meta({ description: "The template's text part, or the one derived from the HTML" }),
  })
  .meta({ id: "RenderedEmail", description: "An e-mail as it would be sent now" });

export const renderTemplate = defineRoute({
  auth: "api-key",
  rateLimit: "preview",
  definition: createRoute({
    method: "post",
    path: "/api/v1/templates/{name}/render",
    tags: ["Templates"],
    summary: "Preview an e-mail template",
    description:
      "Renders the template exactly as a delivery would (editable regions, then merge variables, then the " +
      "text part), with the regions and variables given here; nothing is sent or stored. A template that " +
      "cannot be rendered answers 422 with the reason an e-mail using it would be rejected with.",
    request: {
      params: templateNameParams,
      body: { required: true, content: jsonContent(body) },
    },
    responses: {
      200: { description: "The rendered subject, HTML and text", content: jsonContent(rendered) },
      ...oneTemplateErrors(
        "A bad `name`, malformed JSON, a field that breaks the schema or an unknown field (named)",
        JSON_BODY_ERRORS,
        {
          422:
            "The template cannot be rendered (e.g. a Handlebars syntax error, or the render takes more than " +
            `${RENDER_DEADLINE_MS} ms or ${RENDER_HEAP_MB} MB); the reason says where`,
          429:
            "Too many renders of the organization's templates are waiting, or they would take longer than the request may; " +
            "`Retry-After` says when to retry. Each organization's renders take turns with the others'",
        },
        {
          429:
            "Over the organization's preview rate (`TEMPLATE_PREVIEW_RATE_LIMIT` a second, default 10, bursts of 20); " +
            "retry after `Retry-After` seconds",
        },
      ),
    },
  }),
  async handler(c, deps) {
    const { name } = c.req.valid("param");
    const request = await parseJsonBody(c, body);
    const template = await findTemplate(deps.db, c.get("organization").id, name);
    if (!template) throw noSuchTemplate();
    try {
      const { subject = "", template_content, merge_language, global_merge_vars } = request;
      // On the sandbox's threads, in the organization's turn: a template can neither hold this
      // process nor take its heap, nor keep another organization's previews waiting.
      const email = await renderSandbox.render(
        template,
        { template_name: name, template_content, message: { subject, merge_language, global_merge_vars } },
        renderOptionsFor(c, deps),
      );
      return c.json(email, 200);
    } catch (error) {
      if (error instanceof TemplateRenderError) throw new ApiError(422, error.message);
      throw renderRefusal(error);
    }
  },
});
