import type { PriorityTier } from "../../domain/priority.js";
import { type MessageOf, type PrepareDeps, type Prepared, readyFor } from "../channel.js";
import { pushPayloadText } from "./payload.js";
import type { PushMessage, PushUrgency } from "./providers/provider.js";

/** Critical and high tiers wake the device; low ones may wait for it (RFC 8030 §5.3). */
const URGENCY: Record<PriorityTier, PushUrgency> = {
  critical: "high",
  high: "high",
  medium: "normal",
  low: "low",
};

/** Builds what the service worker receives, and how long and how urgently the push service holds it. */
export function preparePush(
  message: MessageOf<"push">,
  { provider, now }: PrepareDeps<PushMessage>,
): Prepared {
  const { keys, title, body, data, ttlSeconds } = message.push;
  const payload = pushPayloadText(message.id, title, body, data);
  return readyFor(provider, (attempt) => ({
    messageId: message.id,
    subscription: { endpoint: message.recipient, keys },
    payload,
    // Without a TTL of its own, the push service keeps it no longer than the message lives.
    ttlSeconds:
      ttlSeconds ?? Math.max(0, Math.ceil((Date.parse(message.expiresAt) - now().getTime()) / 1000)),
    urgency: URGENCY[message.priority],
    attempt,
  }));
}
