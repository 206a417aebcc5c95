import { createRoute } from "@hono/zod-openapi";
import { z } from "zod";
import {
  templateName,
  templateSummary,
  toTemplateSummary,
} from "../../../channels/email/templates/schemas.js";
import * as templateStore from "../../../channels/email/templates/store.js";
import { API_KEY_ERRORS, errorResponses, jsonContent, SERVER_ERRORS } from "../../../http/openapi.js";
import { defineRoute } from "../../types.js";
import { pageLimit } from "../../wire/common-schemas.js";

// Strict, as the messages listing: a misspelt parameter is a 400, not silently ignored.
const query = z.strictObject({
  limit: pageLimit(1000, 100, "Templates per page"),
  cursor: z
    .string()
    .transform((value, ctx) => {
      const name = decodeCursor(value);
      if (name === undefined)
        ctx.addIssue({ code: "custom", message: "is not a cursor this endpoint returned" });
      return name ?? z.NEVER;
    })
    .optional()
    .meta({ description: "The previous page's `next_cursor`" }),
});

/** The cursor clients see: opaque, base64url of the page's last name. */
function encodeCursor(name: string): string {
  return Buffer.from(name).toString("base64url");
}

function decodeCursor(value: string): string | undefined {
  if (!/^[A-Za-z0-9_-]+$/.test(value)) return undefined;
  const name = Buffer.from(value, "base64url").toString("utf8");
  return templateName.safeParse(name).success ? name : undefined;
}

export const listTemplates = defineRoute({
  auth: "api-key",
  definition: createRoute({
    method: "get",
    path: "/api/v1/templates",
    tags: ["Templates"],
    summary: "List the organization's e-mail templates",
    description:
      "By name in byte (ASCII) order (digits, then upper case, then lower case), a page at a time. " +
      "Names and timestamps only; read a template for its content.",
    request: { query },
    responses: {
      200: {
        description:
          "One page of templates (an empty list when there are none); `next_cursor` is null on the last page",
        content: jsonContent(
          z.object({
            templates: z.array(templateSummary),
            next_cursor: z.string().nullable().meta({ description: "Pass as `cursor` for the next page" }),
          }),
        ),
      },
      ...errorResponses(
        { 400: "A bad `limit` or `cursor`, or an unknown query parameter" },
        API_KEY_ERRORS,
        SERVER_ERRORS,
      ),
    },
  }),
  async handler(c, deps) {
    const { limit, cursor } = c.req.valid("query");
    const page = await templateStore.listTemplates(deps.db, c.get("organization").id, {
      limit,
      after: cursor,
    });
    return c.json(
      { templates: page.rows.map(toTemplateSummary), next_cursor: page.next && encodeCursor(page.next) },
      200,
    );
  },
});
