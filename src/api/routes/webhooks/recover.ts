import { createRoute } from "@hono/zod-openapi";
import { z } from "zod";
import {
  recoverSinceProblem,
  WEBHOOK_RECOVER_MAX_AGE_MS,
  WEBHOOK_RECOVER_MAX_EVENTS,
} from "../../../domain/webhooks.js";
import { ApiError } from "../../../http/errors.js";
import { parseJsonBody } from "../../../http/json-body.js";
import { JSON_BODY_ERRORS, jsonContent } from "../../../http/openapi.js";
import { recoverWebhookEvents } from "../../../messages/webhooks.js";
import { findWebhookEndpoint } from "../../../store/webhooks.js";
import { defineRoute } from "../../types.js";
import { endpointIdParams, noSuchEndpoint, oneEndpointErrors } from "./one-endpoint.js";

const MAX_AGE_DAYS = WEBHOOK_RECOVER_MAX_AGE_MS / (24 * 3_600_000);

const body = z.strictObject({
  since: z.iso
    .datetime({
      offset: true,
      error: "must be an RFC 3339 date-time with a time zone, e.g. 2026-11-24T08:00:00Z",
    })
    .meta({
      description: `Re-send the events that occurred at or after this instant: not in the future, at most ${MAX_AGE_DAYS} days ago`,
      example: "2026-11-24T08:00:00Z",
    }),
});

const recoveryRecord = z
  .object({
    recovered: z.int().min(0).meta({
      description:
        "Events queued to be sent again, in order (those still waiting to be sent are counted, not doubled)",
    }),
    truncated: z.boolean().meta({
      description: `More than ${WEBHOOK_RECOVER_MAX_EVENTS.toLocaleString("en")} events matched: call again with \`since\` = \`next_since\``,
    }),
    next_since: z.iso.datetime().nullable().meta({
      description: "When `truncated`: the time of the first event left out; null otherwise",
    }),
  })
  .meta({ id: "WebhookRecovery" });

export const recoverWebhookEndpoint = defineRoute({
  auth: "api-key",
  rateLimit: "webhook-recover",
  definition: createRoute({
    method: "post",
    path: "/api/v1/webhooks/endpoints/{id}/recover",
    tags: ["Webhooks"],
    summary: "Re-send a webhook endpoint's events since an instant",
    description:
      "Queues again, to this endpoint, every event of the organization's messages that occurred at or " +
      "after `since` and that the endpoint subscribes to now, in the order they occurred, with their " +
      "original `webhook-id`s (deduplicate on it). Events already waiting to be sent are not doubled. " +
      `At most ${WEBHOOK_RECOVER_MAX_EVENTS.toLocaleString("en")} events a call: then \`truncated\` is ` +
      "true and `next_since` says where to go on from. The endpoint must be enabled (409 otherwise: " +
      "enable it first with `PATCH`). Sending happens afterwards, like any other delivery; the " +
      "attempts list shows it. At most 2 at once and one every 10 s per organization (429).",
    request: { params: endpointIdParams, body: { required: true, content: jsonContent(body) } },
    responses: {
      202: { description: "Queued", content: jsonContent(recoveryRecord) },
      ...oneEndpointErrors(
        {
          400: "A bad `id`, malformed JSON, `since` missing or not an RFC 3339 date-time, or an unknown field",
        },
        JSON_BODY_ERRORS,
        {
          409: "The endpoint is disabled: enable it first",
          422: `\`since\` is in the future or more than ${MAX_AGE_DAYS} days ago`,
          429: "Too many recoveries: one every 10 s per organization (2 at once); retry after `Retry-After` seconds",
        },
      ),
    },
  }),
  async handler(c, deps) {
    const { id } = c.req.valid("param");
    const { since } = await parseJsonBody(c, body);
    const endpoint = await findWebhookEndpoint(deps.db, c.get("organization").id, id);
    if (!endpoint) throw noSuchEndpoint();
    const sinceDate = new Date(since);
    const problem = recoverSinceProblem(sinceDate, deps.now());
    if (problem) throw new ApiError(422, problem);
    const result = await recoverWebhookEvents(deps, endpoint, sinceDate);
    if (result.outcome === "disabled") {
      throw new ApiError(
        409,
        "Webhook endpoint is disabled: enable it (PATCH enabled: true) before recovering",
      );
    }
    return c.json(
      {
        recovered: result.recovered,
        truncated: result.nextSince !== null,
        next_since: result.nextSince?.toISOString() ?? null,
      },
      202,
    );
  },
});
