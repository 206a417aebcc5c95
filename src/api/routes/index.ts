import type { Route } from "../types.js";
import { createErasure } from "./erasures/create.js";
import { cancelMessageRoute } from "./messages/cancel.js";
import { getMessage } from "./messages/get.js";
import { getMessageEvents } from "./messages/get-events.js";
import { listMessages } from "./messages/list.js";
import { sendRoutes } from "./notifications/send.js";
import { sendBatchRoutes } from "./notifications/send-batch.js";
import { eraseOrganizationData } from "./organizations/erase-data.js";
import { getOrganization } from "./organizations/get.js";
import { onboardOrganizations } from "./organizations/onboard.js";
import { deleteSender } from "./senders/delete.js";
import { listSenders } from "./senders/list.js";
import { registerDomain } from "./senders/register-domain.js";
import { registerSmsSender } from "./senders/register-sms.js";
import { verifySenderDomain } from "./senders/verify-domain.js";
import { createSuppressions } from "./suppressions/create.js";
import { deleteSuppression } from "./suppressions/delete.js";
import { listSuppressions } from "./suppressions/list.js";
import { createTemplate } from "./templates/create.js";
import { deleteTemplate } from "./templates/delete.js";
import { getTemplate } from "./templates/get.js";
import { listTemplates } from "./templates/list.js";
import { renderTemplate } from "./templates/render.js";
import { updateTemplate } from "./templates/update.js";
import { listWebhookAttempts } from "./webhooks/attempts.js";
import { createWebhookEndpointRoute } from "./webhooks/create.js";
import { deleteWebhookEndpoint } from "./webhooks/delete.js";
import { getWebhookEndpoint } from "./webhooks/get.js";
import { listWebhookEndpoints } from "./webhooks/list.js";
import { recoverWebhookEndpoint } from "./webhooks/recover.js";
import { rotateWebhookSecretRoute } from "./webhooks/rotate-secret.js";
import { testWebhookEndpoint } from "./webhooks/send-test.js";
import { updateWebhookEndpointRoute } from "./webhooks/update.js";

/** Every endpoint of the notification API, in one visible list. */
export const routes: readonly Route[] = [
  getOrganization,
  onboardOrganizations,
  eraseOrganizationData,
  ...sendRoutes,
  ...sendBatchRoutes,
  listMessages,
  getMessage,
  getMessageEvents,
  cancelMessageRoute,
  createErasure,
  createTemplate,
  listTemplates,
  getTemplate,
  updateTemplate,
  deleteTemplate,
  renderTemplate,
  listSenders,
  registerDomain,
  verifySenderDomain,
  registerSmsSender,
  deleteSender,
  createWebhookEndpointRoute,
  listWebhookEndpoints,
  getWebhookEndpoint,
  updateWebhookEndpointRoute,
  deleteWebhookEndpoint,
  rotateWebhookSecretRoute,
  testWebhookEndpoint,
  recoverWebhookEndpoint,
  listWebhookAttempts,
  listSuppressions,
  createSuppressions,
  deleteSuppression,
];

/** The OpenAPI document's `info`. */
export const apiInfo = {
  title: "Notification API",
  description:
    "Multi-tenant notifications: onboard organizations, send SMS, e-mail (from templates) and Web Push, " +
    "read every message's record and history. " +
    'Every error is JSON `{ "error": "<readable message>" }`.',
};
