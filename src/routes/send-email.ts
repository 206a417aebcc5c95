import { z } from "zod";
import {
  EMAIL_RECIPIENT_TYPES,
  type EmailTemplateFields,
  MERGE_LANGUAGES,
} from "../domain/channel-content.js";
import { anyJson } from "../http/common-schemas.js";
import { parseJsonBody } from "../http/json-body.js";
import { answerSend, payloadObjectError, sendBody, sendRouteDefinition } from "../http/send-route.js";
import { defineRoute } from "../http/types.js";
import { templateName } from "../templates/schemas.js";

/** A header value: one line (a CR or LF would let a value forge headers). */
const headerText = (max: number) =>
  z
    .string({ error: "must be a string" })
    .max(max, `must be at most ${max} characters`)
    .regex(/^[^\r\n]*$/, "must not contain line breaks");

const address = z
  .email({ error: "must be an e-mail address" })
  .max(254, "must be at most 254 characters")
  .meta({ example: "ada@example.com" });

const mergeVarName = z
  .string({ error: "must be a string" })
  .regex(/^[A-Za-z0-9][A-Za-z0-9_]{0,99}$/, "must be 1-100 letters, digits or _, not starting with _");

const payload = z.strictObject(
  {
    template_name: templateName,
    template_content: z
      .array(
        z.strictObject({
          name: z.string({ error: "must be a string" }).min(1, "must not be empty").max(100),
          content: z.string({ error: "must be a string" }),
        }),
      )
      .max(100, "must have at most 100 entries")
      .default([])
      .meta({ description: 'Editable regions: the element with `mc:edit="<name>"` gets `content` (HTML)' }),
    message: z.strictObject(
      {
        from_email: address,
        from_name: headerText(100).optional(),
        subject: headerText(998)
          .refine((v) => v.trim().length > 0, "must not be empty")
          .meta({ description: "1-998 characters; merge tags are applied to it too" }),
        to: z
          .array(
            z.strictObject({
              email: address,
              name: headerText(100).optional(),
              type: z
                .enum(EMAIL_RECIPIENT_TYPES, { error: "must be one of: to, cc, bcc" })
                .default("to")
                .meta({ description: "`to` (default), `cc` or `bcc` (in the envelope only)" }),
            }),
          )
          .min(1, "must have at least one recipient")
          .max(50, "must have at most 50 recipients")
          .refine((to) => to.some((r) => r.type === "to"), 'must have at least one recipient of type "to"'),
        merge_language: z
          .enum(MERGE_LANGUAGES, { error: "must be one of: mailchimp, handlebars" })
          .default("mailchimp")
          .meta({ description: "`mailchimp`: `*|NAME|*` tags; `handlebars`: `{{name}}`, `{{#each}}`, …" }),
        global_merge_vars: z
          .array(
            z.strictObject({
              name: mergeVarName,
              content: anyJson.meta({ description: "Any JSON value (objects and arrays for handlebars)" }),
            }),
          )
          .max(100, "must have at most 100 entries")
          .default([]),
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
