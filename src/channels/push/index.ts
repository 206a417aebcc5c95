import type { Channel } from "../channel.js";
import { preparePush } from "./prepare.js";
import type { PushMessage } from "./providers/provider.js";
import { pushContent, pushPayload, refusePush } from "./request.js";

/** Web Push: a notification to a browser's subscription, through its push service or the simulator. */
export const push: Channel<"push", typeof pushPayload, PushMessage> = {
  name: "push",
  label: "Push",
  route: {
    path: "/api/v1/notifications/push",
    summary: "Send a Web Push notification",
    description:
      "Encrypted (RFC 8291) and VAPID-signed (RFC 8292) to the subscription in `payload.to`. The " +
      "service worker receives the JSON `{ title, body, data?, message_id }`; a retry carries the " +
      "same `message_id` (and the same Web Push `Topic`), so a duplicate can be recognised. A push " +
      "service answering 404 or 410 (the subscription is gone) makes the message `rejected`. The " +
      "endpoint's host must be one of `PUSH_ENDPOINT_HOSTS` (by default the browsers' push services), " +
      "and its address public unless the operator allows its network (`OUTBOUND_ALLOWED_NETWORKS`).",
  },
  payload: pushPayload,
  refuse: refusePush,
  content: pushContent,
  record: (message) => ({ body: message.push.body, subject: message.push.title, templateFields: null }),
  prepare: preparePush,
  createProvider: async (config, options) =>
    (await import("./providers/index.js")).createPushProvider(config, options),
};
