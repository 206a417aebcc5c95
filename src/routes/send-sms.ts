import { createHash } from "node:crypto";
import { z } from "zod";
import {
  dryRunQuery,
  idempotencyKeyHeader,
  notificationType,
  phoneNumber,
  smsSender,
} from "../http/common-schemas.js";
import { ApiError } from "../http/errors.js";
import { parseJsonBody, parseParams } from "../http/json-body.js";
import type { Route } from "../http/types.js";
import { acceptMessage } from "../messages/accept.js";

const body = z.strictObject({
  payload: z.strictObject(
    {
      to: phoneNumber,
      body: z
        .string({ error: "must be a string" })
        .max(1600, "must be at most 1600 characters")
        .refine((v) => v.trim().length > 0, "must not be empty"),
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

export const sendSms: Route = {
  method: "post",
  path: "/api/v1/notifications/sms",
  auth: "api-key",
  async handler(c, deps) {
    const dryRun = parseParams(dryRunQuery, c.req.query("dry_run"));
    const idempotencyKey = parseParams(idempotencyKeyHeader, c.req.header("idempotency-key"));
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
};
