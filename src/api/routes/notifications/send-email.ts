import { z } from "zod";
import {
  emailSubject,
  globalMergeVars,
  headerText,
  mergeLanguage,
  templateContent,
  templateName,
} from "../../../channels/email/templates/schemas.js";
import { EMAIL_RECIPIENT_TYPES, type EmailTemplateFields } from "../../../domain/channel-content.js";
import { parseJsonBody } from "../../json-body.js";
import { defineRoute } from "../../types.js";
import { answerSend, payloadObjectError, sendBody, sendRouteDefinition } from "./send-route.js";

const address = z
  .email({ error: "must be an e-mail address" })
  .max(254, "must be at most 254 characters")
  .meta({ example: "ada@example.com" });

const payload = z.strictObject(
  {
    template_name: templateName,
    template_content: templateContent,
    message: z.strictObject(
      {
        from_email: address,
        // Absent is null in the record, like every field of it without a value.
        from_name: headerText(100).nullable().default(null),
        subject: emailSubject,
        to: z
          .array(
            z.strictObject({
              email: address,
              name: headerText(100).nullable().default(null),
              type: z
                .enum(EMAIL_RECIPIENT_TYPES, { error: "must be one of: to, cc, bcc" })
                .default("to")
                .meta({ description: "`to` (default), `cc` or `bcc` (in the envelope only)" }),
            }),
          )
          .min(1, "must have at least one recipient")
          .max(50, "must have at most 50 recipients")
          .refine((to) => to.some((r) => r.type === "to"), 'must have at least one recipient of type "to"'),
        merge_language: mergeLanguage,
        global_merge_vars: globalMergeVars,
      },
      payloadObjectError,
    ),
  },
  payloadObjectError,
);

const body = sendBody(payload);

export const sendEmail = defineRoute({
  auth: "api-key",
  rateLimit: "send",
  definition: sendRouteDefinition({
    path: "/api/v1/notifications/email",
    summary: "Send an e-mail from a template",
    description:
      "Mailchimp Transactional (Mandrill) send-template style: the organization's template " +
      "`template_name` with its editable regions filled from `template_content` and its merge tags " +
      "from `global_merge_vars`, rendered when the message is delivered (an unknown template " +
      "makes the message `rejected` with reason `template_not_found`). One e-mail goes to every " +
      "recipient, `bcc` ones in the envelope only. The record's `payload.template_fields` is this " +
      "`payload`, defaults applied.",
    body,
    acceptedMessage: "Email notification accepted",
  }),
  async handler(c, deps) {
    const { dry_run } = c.req.valid("query");
    const { "Idempotency-Key": idempotencyKey } = c.req.valid("header");
    const request = await parseJsonBody(c, body);
    const fields: EmailTemplateFields = request.payload;
    const { message } = fields;
    return answerSend(c, deps, {
      label: "Email",
      dryRun: dry_run,
      idempotencyKey,
      content: {
        channel: "email",
        recipient: message.to
          .filter((r) => r.type === "to")
          .map((r) => r.email)
          .join(", "),
        sender: message.from_email,
        email: fields,
      },
      retryEnabled: request.retry_enabled,
      notificationType: request.notification_type,
    });
  },
});
