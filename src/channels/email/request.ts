import { z } from "zod";
import { emailDomainOf, type SenderClaim } from "../../domain/senders.js";
import type { ContentOf } from "../channel.js";
import { payloadObjectError } from "../request.js";
import { EMAIL_RECIPIENT_TYPES, type EmailTemplateFields } from "./content.js";
import {
  emailSubject,
  globalMergeVars,
  headerText,
  mergeLanguage,
  templateContent,
  templateName,
} from "./templates/schemas.js";

export const emailAddress = z
  .email({ error: "must be an e-mail address" })
  .max(254, "must be at most 254 characters")
  .meta({ example: "ada@example.com" });

/** An e-mail send request's `payload`: Mailchimp Transactional's (Mandrill's) send-template call. */
export const emailPayload = z.strictObject(
  {
    template_name: templateName,
    template_content: templateContent,
    message: z.strictObject(
      {
        from_email: emailAddress,
        // Absent is null in the record, like every field of it without a value.
        from_name: headerText(100).nullable().default(null),
        subject: emailSubject,
        to: z
          .array(
            z.strictObject({
              email: emailAddress,
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

/**
 * The message's content: the payload itself, defaults applied, becomes the template fields; the
 * recipient is the `to` addresses and the sender `from_email`.
 */
export function emailContent(fields: EmailTemplateFields): ContentOf<"email"> {
  const { message } = fields;
  return {
    channel: "email",
    recipient: message.to
      .filter((r) => r.type === "to")
      .map((r) => r.email)
      .join(", "),
    sender: message.from_email,
    email: fields,
  };
}

/** The sender to verify: the domain of `from_email`, exactly (a subdomain is a domain of its own). */
export function emailSenderClaim(content: ContentOf<"email">): SenderClaim {
  const domain = emailDomainOf(content.sender);
  return { kind: "email_domain", value: domain, described: `from_email domain ${domain}` };
}
