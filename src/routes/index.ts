import type { Route } from "../http/types.js";
import { getMessage } from "./get-message.js";
import { getMessageEvents } from "./get-message-events.js";
import { getOrganization } from "./get-organization.js";
import { listMessages } from "./list-messages.js";
import { onboardOrganizations } from "./onboard-organizations.js";
import { sendSms } from "./send-sms.js";

/** Every endpoint of the notification API, in one visible list. */
export const routes: readonly Route[] = [
  getOrganization,
  onboardOrganizations,
  sendSms,
  listMessages,
  getMessage,
  getMessageEvents,
];

/** The OpenAPI document's `info`. */
export const apiInfo = {
  title: "Notification API",
  description:
    "Multi-tenant notifications: onboard organizations, send SMS, read every message's record and history. " +
    'Every error is JSON `{ "error": "<readable message>" }`.',
};
