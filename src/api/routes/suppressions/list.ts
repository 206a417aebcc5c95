import { createRoute } from "@hono/zod-openapi";
import { z } from "zod";
import { SUPPRESSION_REASONS } from "../../../domain/suppression.js";
import { API_KEY_ERRORS, errorResponses, jsonContent, SERVER_ERRORS } from "../../../http/openapi.js";
import { pageOfSuppressions } from "../../../store/suppressions.js";
import { defineRoute } from "../../types.js";
import { pageLimit } from "../../wire/common-schemas.js";
import { channel, suppressionRecord, toSuppressionRecord } from "./one-suppression.js";

const query = z.strictObject({
  channel: channel.optional(),
  reason: z
    .enum(SUPPRESSION_REASONS, { error: () => `must be one of: ${SUPPRESSION_REASONS.join(", ")}` })
    .optional(),
  limit: pageLimit(1000, 100, "Entries per page"),
  cursor: z
    .string()
    .regex(/^[1-9][0-9]{0,17}$/, "is not a cursor this endpoint returned")
    .optional()
    .meta({ description: "The previous page's `next_cursor`" }),
});

export const listSuppressions = defineRoute({
  auth: "api-key",
  definition: createRoute({
    method: "get",
    path: "/api/v1/suppressions",
    tags: ["Suppressions"],
    summary: "List the organization's suppression list",
    description:
      "The recipients its messages are not sent to (a message to one ends `rejected`, reason `recipient_suppressed`), " +
      "oldest first, a page at a time, optionally of one channel or reason.",
    request: { query },
    responses: {
      200: {
        description: "One page; `next_cursor` is null on the last page",
        content: jsonContent(
          z.object({
            suppressions: z.array(suppressionRecord),
            next_cursor: z.string().nullable().meta({ description: "Pass as `cursor` for the next page" }),
          }),
        ),
      },
      ...errorResponses(
        { 400: "A bad `channel`, `reason`, `limit` or `cursor`, or an unknown query parameter" },
        API_KEY_ERRORS,
        SERVER_ERRORS,
      ),
    },
  }),
  async handler(c, deps) {
    const { limit, cursor, channel, reason } = c.req.valid("query");
    const rows = await pageOfSuppressions(deps.db, deps.store.content, c.get("organization").id, {
      limit,
      ...(cursor !== undefined && { afterId: Number(cursor) }),
      ...(channel && { channel }),
      ...(reason && { reason }),
    });
    const last = rows.length === limit ? rows.at(-1) : undefined;
    return c.json(
      { suppressions: rows.map(toSuppressionRecord), next_cursor: last ? String(last.id) : null },
      200,
    );
  },
});
