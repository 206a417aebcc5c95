import { createRoute } from "@hono/zod-openapi";
import { z } from "zod";
import { ApiError } from "../../../http/errors.js";
import { parseJsonBody } from "../../../http/json-body.js";
import {
  API_KEY_ERRORS,
  errorResponses,
  JSON_BODY_ERRORS,
  jsonContent,
  SERVER_ERRORS,
} from "../../../http/openapi.js";
import { suppressRecipients } from "../../../store/suppressions.js";
import { defineRoute } from "../../types.js";
import { channel, parseRecipient } from "./one-suppression.js";

/** Entries per request. */
export const MAX_SUPPRESSIONS_PER_REQUEST = 1000;
/** 1,000 entries of push endpoints up to 2 KiB each. */
const MAX_BODY_BYTES = 2 * 1024 * 1024 + 64 * 1024;

const body = z.strictObject({
  entries: z
    .array(
      z.strictObject({
        channel,
        recipient: z.string({ error: "must be a string" }).meta({
          description: "An E.164 number (sms), an e-mail address (email) or an https push endpoint (push)",
        }),
      }),
      { error: "must be an array" },
    )
    .min(1, "must have at least one entry")
    .max(MAX_SUPPRESSIONS_PER_REQUEST, `must have at most ${MAX_SUPPRESSIONS_PER_REQUEST} entries`),
});

const result = z.object({
  channel: z.string(),
  recipient: z.string().meta({ description: "As stored: E.164, or in lower case" }),
  status: z.enum(["added", "already_suppressed"]).meta({
    description:
      "already_suppressed: on the list before (its reason and date unchanged), or named twice here",
  }),
});

export const createSuppressions = defineRoute({
  auth: "api-key",
  maxBodyBytes: MAX_BODY_BYTES,
  definition: createRoute({
    method: "post",
    path: "/api/v1/suppressions",
    tags: ["Suppressions"],
    summary: "Add recipients to the suppression list",
    description:
      `Up to ${MAX_SUPPRESSIONS_PER_REQUEST} entries, reason \`manual\`. Every recipient is checked first: ` +
      "one invalid and nothing is added. Messages already accepted to them are not sent either (checked before each attempt).",
    request: { body: { required: true, content: jsonContent(body) } },
    responses: {
      200: {
        description: "Each entry, in order, and what became of it",
        content: jsonContent(
          z.object({ added: z.int().min(0), already_suppressed: z.int().min(0), entries: z.array(result) }),
        ),
      },
      ...errorResponses(
        {
          400: "Malformed JSON, an unknown field, no entries or too many, an unknown channel or an invalid recipient",
        },
        API_KEY_ERRORS,
        JSON_BODY_ERRORS,
        SERVER_ERRORS,
      ),
    },
  }),
  async handler(c, deps) {
    const { entries } = await parseJsonBody(c, body);
    const parsed = entries.map((entry, i) => {
      const recipient = parseRecipient(entry.channel, entry.recipient);
      if (!recipient.ok) throw new ApiError(400, `entries.${i}.recipient: ${recipient.error}`);
      return { channel: entry.channel, recipient: recipient.recipient.toLowerCase() };
    });
    const added = await suppressRecipients(
      deps.db,
      deps.store.content,
      c.get("organization").id,
      parsed.map((entry) => ({ ...entry, reason: "manual" as const, messageId: null })),
    );
    const count = added.filter(Boolean).length;
    return c.json(
      {
        added: count,
        already_suppressed: parsed.length - count,
        entries: parsed.map((entry, i) => ({
          ...entry,
          status: added[i] ? ("added" as const) : ("already_suppressed" as const),
        })),
      },
      200,
    );
  },
});
