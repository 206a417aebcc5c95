import { createRoute } from "@hono/zod-openapi";
import { z } from "zod";
import type { Database } from "../../../../db/client.js";
import { CHANNELS, STATUSES } from "../../../domain/events.js";
import { API_KEY_ERRORS, errorResponses, jsonContent, SERVER_ERRORS } from "../../../http/openapi.js";
import { decodeCursor, encodeCursor, pageOfMessages } from "../../../store/listing.js";
import { orFromPrimary } from "../../../store/read-replica.js";
import { defineRoute } from "../../types.js";
import { pageLimit } from "../../wire/common-schemas.js";
import { messageRecord, toMessageRecord } from "../../wire/message-record.js";

const dateTime = z.iso
  .datetime({
    offset: true,
    error: "must be an ISO 8601 date-time with a time zone, e.g. 2026-01-31T09:00:00Z",
  })
  .transform((value) => new Date(value));

// Strict: a misspelt filter would otherwise widen the result silently.
const query = z.strictObject({
  status: z.enum(STATUSES, { error: `must be one of: ${STATUSES.join(", ")}` }).optional(),
  channel: z.enum(CHANNELS, { error: `must be one of: ${CHANNELS.join(", ")}` }).optional(),
  created_after: dateTime.optional().meta({ description: "Only messages created after this instant" }),
  created_before: dateTime.optional().meta({ description: "Only messages created before this instant" }),
  scheduled: z
    .enum(["true", "false"], { error: "must be true or false" })
    .optional()
    .transform((value) => (value === undefined ? undefined : value === "true"))
    .meta({
      description:
        "`true`: only scheduled sends still waiting for their `send_at` (not attempted yet); `false`: every other message",
    }),
  limit: pageLimit(100, 20, "Messages per page"),
  cursor: z
    .string()
    .transform((value, ctx) => {
      const cursor = decodeCursor(value);
      if (!cursor) ctx.addIssue({ code: "custom", message: "is not a cursor this endpoint returned" });
      return cursor ?? z.NEVER;
    })
    .optional()
    .meta({ description: "The previous page's `next_cursor`; keep the other parameters the same" }),
});

export const listMessages = defineRoute({
  auth: "api-key",
  definition: createRoute({
    method: "get",
    path: "/api/v1/messages",
    tags: ["Messages"],
    summary: "List the organization's messages",
    description: "Newest first (`created_at`, then `message_id`, descending), a page at a time.",
    request: { query },
    responses: {
      200: {
        description: "One page of records; `next_cursor` is null on the last page",
        content: jsonContent(
          z.object({
            messages: z.array(messageRecord),
            next_cursor: z.string().nullable().meta({ description: "Pass as `cursor` for the next page" }),
          }),
        ),
      },
      ...errorResponses(
        { 400: "A bad filter, `limit` or `cursor`, or an unknown query parameter" },
        API_KEY_ERRORS,
        SERVER_ERRORS,
      ),
    },
  }),
  async handler(c, deps) {
    const { status, channel, created_after, created_before, scheduled, limit, cursor } = c.req.valid("query");
    const filters = {
      status,
      channel,
      createdAfter: created_after,
      createdBefore: created_before,
      scheduled: scheduled === undefined ? undefined : { waiting: scheduled, now: deps.now() },
      limit,
      after: cursor,
    };
    const organizationId = c.get("organization").id;
    const pageOn = (db: Database) => pageOfMessages(db, deps.store.content, organizationId, filters);
    // On the replica when there is one (it may lag: a message accepted a moment ago may be
    // missing from the page), on the primary when the replica cannot answer.
    const { replica } = deps;
    const page = await orFromPrimary(
      replica && { read: () => pageOn(replica.db), pause: replica.pause },
      () => pageOn(deps.db),
      () => true,
    )();
    return c.json(
      {
        messages: page.rows.map(toMessageRecord),
        next_cursor: page.nextCursor && encodeCursor(page.nextCursor),
      },
      200,
    );
  },
});
