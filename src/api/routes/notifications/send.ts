import type { Channel } from "../../../channels/channel.js";
import { channels } from "../../../channels/index.js";
import { ApiError } from "../../../http/errors.js";
import { parseJsonBody } from "../../../http/json-body.js";
import { defineRoute } from "../../types.js";
import { answerSend, checkedSendAt, sendBody, sendRouteDefinition } from "./send-route.js";

/** `POST /api/v1/notifications/<channel>`: the send endpoint of one channel, from its definition. */
function sendRoute(channel: Channel) {
  const body = sendBody(channel.payload);
  return defineRoute({
    auth: "api-key",
    rateLimit: "send",
    definition: sendRouteDefinition({
      ...channel.route,
      body,
      acceptedMessage: `${channel.label} notification accepted`,
    }),
    async handler(c, deps) {
      const { dry_run } = c.req.valid("query");
      const { "Idempotency-Key": idempotencyKey } = c.req.valid("header");
      const request = await parseJsonBody(c, body);
      const sendAt = checkedSendAt(request.send_at, deps);
      const refused = channel.refuse?.(request.payload, deps.config);
      if (refused !== undefined) throw new ApiError(400, refused);
      const content = channel.content(request.payload, deps.config);
      if (deps.senders.required) {
        const organizationId = c.get("organization").id;
        const claim = channel.sender?.(content, deps.config);
        const unverified = await deps.senders.refusal(organizationId, claim);
        // The retry of an accepted send gets its replay, even once its sender is gone.
        const replay =
          unverified !== undefined &&
          !dry_run &&
          idempotencyKey !== undefined &&
          (await deps.store.holdsIdempotencyKey(organizationId, idempotencyKey, deps.now()));
        if (unverified !== undefined && !replay) throw new ApiError(422, unverified);
      }
      return answerSend(c, deps, {
        label: channel.label,
        dryRun: dry_run,
        idempotencyKey,
        content,
        retryEnabled: request.retry_enabled,
        notificationType: request.notification_type,
        sendAt,
      });
    },
  });
}

/** One send endpoint per channel, in the channels' order. */
export const sendRoutes = channels.map((channel) => sendRoute(channel));
