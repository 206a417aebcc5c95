import { createRoute } from "@hono/zod-openapi";
import { z } from "zod";
import { parseJsonBody } from "../../../http/json-body.js";
import {
  API_KEY_ERRORS,
  errorResponses,
  JSON_BODY_ERRORS,
  jsonContent,
  SERVER_ERRORS,
} from "../../../http/openapi.js";
import { defineRoute } from "../../types.js";

const body = z.strictObject({
  recipient: z
    .string({ error: "must be a string" })
    .trim()
    .min(1, "must not be empty")
    .max(2048, "must be at most 2048 characters")
    .meta({
      description:
        "As messages name it: an E.164 phone number, an e-mail address (any of an e-mail's to, cc or bcc), " +
        "or a push subscription's endpoint. Compared without case.",
    }),
});

export const createErasure = defineRoute({
  auth: "api-key",
  definition: createRoute({
    method: "post",
    path: "/api/v1/erasures",
    tags: ["Messages"],
    summary: "Erase a recipient's message content",
    description:
      "Blanks the content of every message of the organization to this recipient: its record then shows " +
      "`null` for the recipient, body, subject and template fields; its status, timestamps and history stay. " +
      "A message not yet on its way is not sent (`rejected`, reason `content_erased`).",
    request: { body: { required: true, content: jsonContent(body) } },
    responses: {
      200: {
        description: "Erased",
        content: jsonContent(
          z.object({ messages_erased: z.int().min(0).meta({ description: "How many messages named it" }) }),
        ),
      },
      ...errorResponses(
        { 400: "Malformed JSON, a missing or empty `recipient`, or an unknown field" },
        API_KEY_ERRORS,
        JSON_BODY_ERRORS,
        SERVER_ERRORS,
      ),
    },
  }),
  async handler(c, deps) {
    const { recipient } = await parseJsonBody(c, body);
    const erased = await deps.store.eraseRecipient(c.get("organization").id, recipient);
    // The count only: the recipient is what is being erased.
    deps.logger.info(
      { organizationId: c.get("organization").id, erased: erased.length },
      "recipient's content erased",
    );
    return c.json({ messages_erased: erased.length }, 200);
  },
});
