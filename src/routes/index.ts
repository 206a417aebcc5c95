import type { Route } from "../http/types.js";
import { createTemplate } from "./create-template.js";
import { deleteTemplate } from "./delete-template.js";
import { getMessage } from "./get-message.js";
import { getMessageEvents } from "./get-message-events.js";
import { getOrganization } from "./get-organization.js";
import { getTemplate } from "./get-template.js";
import { listMessages } from "./list-messages.js";
import { listTemplates } from "./list-templates.js";
import { onboardOrganizations } from "./onboard-organizations.js";
import { renderTemplate } from "./render-template.js";
import { sendEmail } from "./send-email.js";
import { sendPush } from "./send-push.js";
import { sendSms } from "./send-sms.js";
import { updateTemplate } from "./update-template.js";

/** Every endpoint of the notification API, in one visible list. */
export const routes: readonly Route[] = [
  getOrganization,
  onboardOrganizations,
  sendSms,
  sendEmail,
  sendPush,
  listMessages,
  getMessage,
  getMessageEvents,
  createTemplate,
  listTemplates,
  getTemplate,
  updateTemplate,
  deleteTemplate,
  renderTemplate,
];

/** The OpenAPI document's `info`. */
export const apiInfo = {
  title: "Notification API",
  description:
    "Multi-tenant notifications: onboard organizations, send SMS, e-mail (from templates) and Web Push, " +
    "read every message's record and history. " +
    'Every error is JSON `{ "error": "<readable message>" }`.',
};
