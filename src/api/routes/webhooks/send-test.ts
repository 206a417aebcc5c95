import { createRoute } from "@hono/zod-openapi";
import { jsonContent } from "../../../http/openapi.js";
import { sendTestEvent } from "../../../messages/webhooks.js";
import type { Config } from "../../../runtime/config.js";
import { findWebhookEndpoint } from "../../../store/webhooks.js";
import { defineRoute } from "../../types.js";
import {
  endpointIdParams,
  noSuchEndpoint,
  oneEndpointErrors,
  toAttemptRecord,
  webhookAttemptRecord,
  webhookDeps,
} from "./one-endpoint.js";

/** How long a test POST may take: well inside the request's own deadline, at most 5 s. */
export function testTimeoutMs(config: Pick<Config, "REQUEST_TIMEOUT_MS">): number {
  return Math.max(100, Math.min(5_000, config.REQUEST_TIMEOUT_MS - 1_000));
}

export const testWebhookEndpoint = defineRoute({
  auth: "api-key",
  rateLimit: "webhook-test",
  definition: createRoute({
    method: "post",
    path: "/api/v1/webhooks/endpoints/{id}/test",
    tags: ["Webhooks"],
    summary: "Send a test event to a webhook endpoint now",
    description:
      "POSTs a signed `webhook.test` event to the endpoint (enabled or not, whatever it subscribes " +
      "to) while the request waits, at most `REQUEST_TIMEOUT_MS` − 1 s (5 s at most), once, without " +
      "retries; records the attempt and answers with it. A failed attempt is still a 200: its " +
      "`error` says what happened. At most 5 at once and 1 a second per organization (429).",
    request: { params: endpointIdParams },
    responses: {
      200: { description: "The attempt", content: jsonContent(webhookAttemptRecord) },
      ...oneEndpointErrors({
        429: "Too many test events: 1 a second per organization (bursts of 5); retry after `Retry-After` seconds",
      }),
    },
  }),
  async handler(c, deps) {
    const { id } = c.req.valid("param");
    const endpoint = await findWebhookEndpoint(deps.db, c.get("organization").id, id);
    if (!endpoint) throw noSuchEndpoint();
    const attempt = await sendTestEvent(webhookDeps(deps), endpoint, testTimeoutMs(deps.config));
    return c.json(toAttemptRecord(attempt), 200);
  },
});
