/**
 * What a push message carries besides the common fields, exactly as events store it: a Web Push
 * subscription's keys (its endpoint is the message's recipient) plus the notification shown.
 * Pure, like the domain that holds it.
 */

declare module "../../domain/events.js" {
  interface ChannelContents {
    push: { push: PushContent };
  }
}
export interface PushContent {
  /** The subscription's keys (its endpoint is the message's recipient). */
  keys: { p256dh: string; auth: string };
  title: string;
  body: string;
  /** Free-form JSON handed to the service worker with the notification. */
  data: unknown;
  /** How long the push service keeps it for an offline device; null: until the message expires. */
  ttlSeconds: number | null;
}
