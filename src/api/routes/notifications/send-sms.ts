import { z } from "zod";
import { parseJsonBody } from "../../json-body.js";
import { defineRoute } from "../../types.js";
import { phoneNumber, smsSender } from "../../wire/common-schemas.js";
import { answerSend, payloadObjectError, sendBody, sendRouteDefinition } from "./send-route.js";

const body = sendBody(
  z.strictObject(
    {
      to: phoneNumber,
      body: z
        .string({ error: "must be a string" })
        .max(1600, "must be at most 1600 characters")
        .refine((v) => v.trim().length > 0, "must not be empty")
        .meta({ description: "The text: 1-1600 characters, not blank", minLength: 1, pattern: "\\S" }),
      sender: smsSender.optional(),
    },
    payloadObjectError,
  ),
);

export const sendSms = defineRoute({
  auth: "api-key",
  rateLimit: "send",
  definition: sendRouteDefinition({
    path: "/api/v1/notifications/sms",
    summary: "Send an SMS",
    description: "Sends `payload.body` to `payload.to`.",
    body,
    acceptedMessage: "SMS notification accepted",
  }),
  async handler(c, deps) {
    const { dry_run } = c.req.valid("query");
    const { "Idempotency-Key": idempotencyKey } = c.req.valid("header");
    const request = await parseJsonBody(c, body);
    return answerSend(c, deps, {
      label: "SMS",
      dryRun: dry_run,
      idempotencyKey,
      content: {
        channel: "sms",
        recipient: request.payload.to,
        sender: request.payload.sender ?? deps.config.SMS_DEFAULT_SENDER,
        body: request.payload.body,
      },
      retryEnabled: request.retry_enabled,
      notificationType: request.notification_type,
    });
  },
});
