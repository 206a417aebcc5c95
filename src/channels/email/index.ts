import type { Channel } from "../channel.js";
import { prepareEmail } from "./prepare.js";
import type { EmailMessage } from "./providers/provider.js";
import { emailContent, emailPayload, emailSenderClaim } from "./request.js";

/** E-mail: one of the organization's templates, rendered at delivery, over SMTP or the simulator. */
export const email: Channel<"email", typeof emailPayload, EmailMessage> = {
  name: "email",
  label: "Email",
  route: {
    path: "/api/v1/notifications/email",
    summary: "Send an e-mail from a template",
    description:
      "Mailchimp Transactional (Mandrill) send-template style: the organization's template " +
      "`template_name` with its editable regions filled from `template_content` and its merge tags " +
      "from `global_merge_vars`, rendered when the message is delivered (an unknown template " +
      "makes the message `rejected` with reason `template_not_found`). One e-mail goes to every " +
      "recipient, `bcc` ones in the envelope only. The record's `payload.template_fields` is this " +
      "`payload`, defaults applied.",
  },
  payload: emailPayload,
  content: emailContent,
  sender: emailSenderClaim,
  // The body is the template, rendered at delivery; the request's payload is kept as sent.
  record: (message) => ({
    body: null,
    subject: message.email.message.subject,
    templateFields: message.email,
  }),
  prepare: prepareEmail,
  createProvider: async (config, options) =>
    (await import("./providers/index.js")).createEmailProvider(config, options),
};
