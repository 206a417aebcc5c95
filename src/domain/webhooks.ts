/**
 * Status webhooks (issue 16, docs/decisions/0035): what an endpoint may subscribe to and where it
 * may point. Pure.
 */

/** The events an endpoint may subscribe to (sent once the fan-out of message events lands). */
export const WEBHOOK_EVENT_TYPES = [
  "message.accepted",
  "message.retry_scheduled",
  "message.succeeded",
  "message.failed",
  "message.rejected",
] as const;
export type WebhookEventType = (typeof WEBHOOK_EVENT_TYPES)[number];

/** The event `POST …/{id}/test` sends, whatever the endpoint subscribes to. */
export const WEBHOOK_TEST_EVENT = "webhook.test";

/** Endpoints one organization may have; one more is a 409. */
export const MAX_WEBHOOK_ENDPOINTS_PER_ORGANIZATION = 10;

/** How long the secret a rotation replaces keeps signing beside the new one. */
export const PREVIOUS_SECRET_LIFETIME_MS = 24 * 60 * 60 * 1000;

export const MAX_WEBHOOK_URL_LENGTH = 2048;

/**
 * Why `url` may not be an endpoint, or undefined when it may. HTTPS anywhere; plain HTTP only to a
 * host of `allowedHttpHosts` (WEBHOOK_ALLOWED_HOSTS: `host`, `host:port` or `*.suffix`). Which
 * addresses may be connected to is decided when connecting (the outbound guard), not here.
 */
export function webhookUrlProblem(url: URL, allowedHttpHosts: readonly string[]): string | undefined {
  if (url.protocol !== "https:" && url.protocol !== "http:") return "must be an https:// URL";
  if (url.username !== "" || url.password !== "") return "must not carry a user name or password";
  if (url.hash !== "") return "must not have a #fragment";
  if (url.protocol === "http:" && !httpHostAllowed(url, allowedHttpHosts)) {
    return `must be an https:// URL (plain http:// only to hosts WEBHOOK_ALLOWED_HOSTS names; ${url.host} is not one)`;
  }
  return undefined;
}

function httpHostAllowed(url: URL, allowed: readonly string[]): boolean {
  const hostname = url.hostname.toLowerCase();
  const host = url.host.toLowerCase();
  return allowed.some((pattern) => {
    if (pattern.startsWith("*.")) return hostname.endsWith(pattern.slice(1));
    return pattern.includes(":") ? pattern === host : pattern === hostname;
  });
}
