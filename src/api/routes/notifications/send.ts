import type { Channel } from "../../../channels/channel.js";
import { channels } from "../../../channels/index.js";
import { ApiError } from "../../../http/errors.js";
import { parseJsonBody } from "../../../http/json-body.js";
import { defineRoute } from "../../types.js";
import { answerSend, sendBody, sendRouteDefinition } from "./send-route.js";

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
      measured: channel.measures !== undefined,
    }),
    async handler(c, deps) {
      const { dry_run } = c.req.valid("query");
      const { "Idempotency-Key": idempotencyKey } = c.req.valid("header");
      const request = await parseJsonBody(c, body);
      const content = channel.content(request.payload, deps.config);
      const organizationId = c.get("organization").id;
      const refused = channel.refuse?.(content, deps.config);
      const unverified = deps.senders.required
        ? await deps.senders.refusal(organizationId, channel.sender?.(content, deps.config))
        : undefined;
      if (refused !== undefined || unverified !== undefined) {
        // The retry of an accepted send gets its replay, even once its sender is gone or the
        // configuration refuses it (a lower SMS_MAX_SEGMENTS).
        const replay =
          !dry_run &&
          idempotencyKey !== undefined &&
          (await deps.store.holdsIdempotencyKey(organizationId, idempotencyKey, deps.now()));
        if (!replay && refused !== undefined) throw new ApiError(400, refused);
        if (!replay && unverified !== undefined) throw new ApiError(422, unverified);
      }
      return answerSend(c, deps, {
        label: channel.label,
        dryRun: dry_run,
        idempotencyKey,
        content,
        measures: channel.measures?.(content),
        retryEnabled: request.retry_enabled,
        notificationType: request.notification_type,
      });
    },
  });
}

/** One send endpoint per channel, in the channels' order. */
export const sendRoutes = channels.map((channel) => sendRoute(channel));
