import type { Route } from "../http/types.js";
import { getMessage } from "./get-message.js";
import { getOrganization } from "./get-organization.js";
import { onboardOrganizations } from "./onboard-organizations.js";
import { sendSms } from "./send-sms.js";

/** Every endpoint of the notification API, in one visible list. */
export const routes: readonly Route[] = [getOrganization, onboardOrganizations, sendSms, getMessage];
