import { createHash } from "node:crypto";
import { createRoute } from "@hono/zod-openapi";
import { z } from "zod";
import {
  dryRunQuery,
  idempotencyKeyHeader,
  notificationType,
  phoneNumber,
  smsSender,
} from "../http/common-schemas.js";
import { ApiError } from "../http/errors.js";
import { parseJsonBody } from "../http/json-body.js";
import {
  API_KEY_ERRORS,
  errorResponses,
  JSON_BODY_ERRORS,
  jsonContent,
  SERVER_ERRORS,
} from "../http/openapi.js";
import { defineRoute } from "../http/types.js";
import { acceptMessage } from "../messages/accept.js";

const body = z.strictObject({
  payload: z.strictObject(
    {
      to: phoneNumber,
      body: z
        .string({ error: "must be a string" })
        .max(1600, "must be at most 1600 characters")
        .refine((v) => v.trim().length > 0, "must not be empty")
        .meta({ description: "The text: 1-1600 characters, not blank", minLength: 1, pattern: "\\S" }),
      sender: smsSender.optional(),
    },
    {
      error: (issue) =>
        issue.code === "invalid_type"
          ? issue.input === undefined
            ? "is required"
            : "must be an object"
          : undefined,
    },
  ),
  retry_enabled: z.boolean({ error: "must be true or false" }).default(true),
  notification_type: notificationType.optional(),
});

const accepted = z.object({
  message: z.literal("SMS notification accepted"),
  request_id: z.uuid().meta({ description: "The message id: read it at /api/v1/messages/{message_id}" }),
});

export const sendSms = defineRoute({
  auth: "api-key",
  rateLimit: "send",
  definition: createRoute({
    method: "post",
    path: "/api/v1/notifications/sms",
    tags: ["Notifications"],
    summary: "Send an SMS",
    description:
      "The 202 is sent once the message's accepted event is committed; a worker then delivers it, " +
      "retrying transient failures. The tier (`payload.priority` of the record) comes from `notification_type`.",
    request: {
      query: z.object({ dry_run: dryRunQuery }),
      headers: z.object({ "Idempotency-Key": idempotencyKeyHeader }),
      body: { required: true, content: jsonContent(body) },
    },
    responses: {
      202: {
        description: "Accepted (or, for a repeated `Idempotency-Key` and body, the first 202 replayed)",
        headers: {
          "Idempotent-Replayed": {
            description: "`true` when this is the replay of an earlier request's 202",
            schema: { type: "string", enum: ["true"] },
          },
        },
        content: jsonContent(accepted),
      },
      200: {
        description: "`?dry_run=true`: the request is valid; nothing was stored or sent",
        content: jsonContent(z.object({ message: z.string() })),
      },
      ...errorResponses(
        {
          400: "Malformed JSON, a field that breaks the schema, an unknown field (named), a bad `dry_run` or `Idempotency-Key`",
        },
        API_KEY_ERRORS,
        JSON_BODY_ERRORS,
        { 422: "`Idempotency-Key` already used with a different body" },
        {
          429: "Over the organization's send rate (`SEND_RATE_LIMIT` a second); retry after `Retry-After` seconds",
        },
        SERVER_ERRORS,
      ),
    },
  }),
  async handler(c, deps) {
    const { dry_run: dryRun } = c.req.valid("query");
    const { "Idempotency-Key": idempotencyKey } = c.req.valid("header");
    const request = await parseJsonBody(c, body);
    if (dryRun)
      return c.json({ message: "SMS notification is valid; nothing was stored or sent (dry run)" }, 200);

    const normalised = {
      channel: "sms" as const,
      recipient: request.payload.to,
      sender: request.payload.sender ?? deps.config.SMS_DEFAULT_SENDER,
      body: request.payload.body,
      retryEnabled: request.retry_enabled,
      notificationType: request.notification_type,
    };
    const result = await acceptMessage(deps, {
      ...normalised,
      organization: c.get("organization"),
      idempotency: idempotencyKey
        ? {
            key: idempotencyKey,
            requestHash: createHash("sha256").update(JSON.stringify(normalised)).digest("hex"),
          }
        : undefined,
    });
    switch (result.outcome) {
      case "accepted":
        return c.json({ message: "SMS notification accepted", request_id: result.messageId }, 202);
      case "replayed":
        c.header("Idempotent-Replayed", "true");
        return c.json({ message: "SMS notification accepted", request_id: result.messageId }, 202);
      case "idempotency_conflict":
        throw new ApiError(422, "Idempotency-Key was already used with a different request body");
    }
  },
});
