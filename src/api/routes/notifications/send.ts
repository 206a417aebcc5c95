import type { Channel } from "../../../channels/channel.js";
import { channels } from "../../../channels/index.js";
import { parseJsonBody } from "../../../http/json-body.js";
import { defineRoute } from "../../types.js";
import { answerSend, checkSend, sendBody, sendRouteDefinition } from "./send-route.js";

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
      const send = await checkSend(channel, request, deps, c.get("organization").id, {
        idempotencyKey,
        dryRun: dry_run,
      });
      return answerSend(c, deps, send);
    },
  });
}

/** One send endpoint per channel, in the channels' order. */
export const sendRoutes = channels.map((channel) => sendRoute(channel));
