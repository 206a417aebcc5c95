import type { Provider } from "../../providers/provider.js";

/** A browser's `PushSubscription.toJSON()`, minus `expirationTime`. */
export interface PushSubscription {
  endpoint: string;
  keys: {
    /** The subscription's P-256 public key, base64url (65 bytes uncompressed). */
    p256dh: string;
    /** The subscription's authentication secret, base64url (16 bytes). */
    auth: string;
  };
}

/** RFC 8030 §5.3: how urgently the push service should wake the device. */
export type PushUrgency = "very-low" | "low" | "normal" | "high";

export interface PushMessage {
  messageId: string;
  subscription: PushSubscription;
  /** The plaintext the browser's service worker receives (JSON text), before encryption. */
  payload: string;
  /** How long the push service keeps the message for an offline device (RFC 8030 TTL header). */
  ttlSeconds: number;
  urgency: PushUrgency;
  /** 1 for the first attempt. */
  attempt: number;
}

/**
 * A way to hand a Web Push message to the subscription's push service (see {@link Provider}); a
 * subscription that is gone (404/410) is `rejected`.
 */
export type PushProvider = Provider<PushMessage>;
