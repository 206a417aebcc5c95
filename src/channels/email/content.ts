/**
 * What an e-mail message carries besides the common fields, exactly as events store it: the
 * request's `payload`, after Mailchimp Transactional's (Mandrill's) send-template call. Pure, like
 * the domain that holds it.
 */

declare module "../../domain/events.js" {
  interface ChannelContents {
    email: { email: EmailTemplateFields };
  }
}

export const MERGE_LANGUAGES = ["mailchimp", "handlebars"] as const;
export type MergeLanguage = (typeof MERGE_LANGUAGES)[number];

export const EMAIL_RECIPIENT_TYPES = ["to", "cc", "bcc"] as const;
export type EmailRecipientType = (typeof EMAIL_RECIPIENT_TYPES)[number];

/** `payload.template_fields` of an e-mail's record: the request's `payload`, as validated. */
export interface EmailTemplateFields {
  template_name: string;
  /** Editable regions: the element with `mc:edit="<name>"` gets `content` as its inner HTML. */
  template_content: Array<{ name: string; content: string }>;
  message: {
    from_email: string;
    from_name: string | null;
    subject: string;
    to: Array<{ email: string; name: string | null; type: EmailRecipientType }>;
    merge_language: MergeLanguage;
    global_merge_vars: Array<{ name: string; content: unknown }>;
  };
}
