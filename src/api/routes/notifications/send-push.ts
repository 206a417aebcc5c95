import { z } from "zod";
import { pushPayloadText } from "../../../channels/push/payload.js";
import { ApiError } from "../../errors.js";
import { parseJsonBody } from "../../json-body.js";
import { defineRoute } from "../../types.js";
import { anyJson } from "../../wire/common-schemas.js";
import { answerSend, payloadObjectError, sendBody, sendRouteDefinition } from "./send-route.js";

/** The longest TTL push services keep (FCM's 28 days). */
const MAX_TTL_SECONDS = 28 * 24 * 60 * 60;
/** Web Push carries one 4 KiB record (RFC 8188): what the service worker receives must fit. */
export const MAX_PUSH_PAYLOAD_BYTES = 3800;

const base64url = (bytes: number, what: string) =>
  z
    .string({ error: "must be a string" })
    .regex(/^[A-Za-z0-9_-]+={0,2}$/, "must be base64url")
    .refine(
      (v) => Buffer.from(v, "base64url").length === bytes,
      `must be ${what} (${bytes} bytes, base64url)`,
    );

const subscription = z
  .strictObject(
    {
      endpoint: z
        .url({ protocol: /^https?$/, error: "must be an http(s) URL" })
        .max(2048, "must be at most 2048 characters")
        .meta({ description: "The push service URL the browser gave (`PushSubscription.endpoint`)" }),
      expirationTime: z
        .number({ error: "must be a number or null" })
        .nullable()
        .optional()
        .meta({ description: "As `PushSubscription.toJSON()` gives it; accepted and ignored" }),
      keys: z.strictObject(
        {
          p256dh: base64url(65, "an uncompressed P-256 public key").refine(
            (v) => Buffer.from(v, "base64url")[0] === 0x04,
            "must be an uncompressed P-256 public key (first byte 0x04)",
          ),
          auth: base64url(16, "the subscription's authentication secret"),
        },
        payloadObjectError,
      ),
    },
    payloadObjectError,
  )
  .meta({ description: "A Web Push subscription: the browser's `PushSubscription.toJSON()`" });

const nonBlank = (max: number) =>
  z
    .string({ error: "must be a string" })
    .max(max, `must be at most ${max} characters`)
    .refine((v) => v.trim().length > 0, "must not be empty");

const payload = z
  .strictObject(
    {
      to: subscription,
      title: nonBlank(250).meta({ description: "1-250 characters" }),
      body: nonBlank(2000).meta({ description: "1-2000 characters" }),
      data: anyJson
        .optional()
        .meta({ description: "Any JSON, handed to the service worker with the notification" }),
      ttl: z
        .int({ error: "must be a whole number of seconds" })
        .min(0, "must be at least 0")
        .max(MAX_TTL_SECONDS, `must be at most ${MAX_TTL_SECONDS} (28 days)`)
        .optional()
        .meta({
          description:
            "Seconds the push service keeps it for an offline device; default: the tier's time to live",
        }),
    },
    payloadObjectError,
  )
  .superRefine((p, ctx) => {
    // The id is a fixed-length UUID, so the size checked here is the size sent.
    const size = Buffer.byteLength(
      pushPayloadText("00000000-0000-0000-0000-000000000000", p.title, p.body, p.data),
    );
    if (size > MAX_PUSH_PAYLOAD_BYTES) {
      ctx.addIssue({
        code: "custom",
        message: `title, body and data together must be at most ${MAX_PUSH_PAYLOAD_BYTES} bytes of JSON (Web Push carries 4 KiB); this is ${size}`,
      });
    }
  });

const body = sendBody(payload);

/**
 * `allowed`: exact hosts (`host` or `host:port`) and `*.suffix` patterns; null allows any. A
 * pattern without a port allows only HTTPS on its default port (push services speak nothing
 * else); `host:port` allows exactly that port, over HTTP or HTTPS (a push service of one's own).
 */
export function hostAllowed(endpoint: URL, allowed: readonly string[] | null): boolean {
  if (allowed === null) return true;
  const hostname = endpoint.hostname.toLowerCase();
  const defaultHttps = endpoint.protocol === "https:" && endpoint.port === "";
  return allowed.some((pattern) => {
    if (pattern.startsWith("*.")) return defaultHttps && hostname.endsWith(pattern.slice(1));
    return pattern.includes(":")
      ? pattern === endpoint.host.toLowerCase()
      : defaultHttps && pattern === hostname;
  });
}

export const sendPush = defineRoute({
  auth: "api-key",
  rateLimit: "send",
  definition: sendRouteDefinition({
    path: "/api/v1/notifications/push",
    summary: "Send a Web Push notification",
    description:
      "Encrypted (RFC 8291) and VAPID-signed (RFC 8292) to the subscription in `payload.to`. The " +
      "service worker receives the JSON `{ title, body, data?, message_id }`; a retry carries the " +
      "same `message_id` (and the same Web Push `Topic`), so a duplicate can be recognised. A push " +
      "service answering 404 or 410 (the subscription is gone) makes the message `rejected`. The " +
      "endpoint's host must be one of `PUSH_ENDPOINT_HOSTS` (in production by default: the browsers' push services).",
    body,
    acceptedMessage: "Push notification accepted",
  }),
  async handler(c, deps) {
    const { dry_run } = c.req.valid("query");
    const { "Idempotency-Key": idempotencyKey } = c.req.valid("header");
    const { payload: push, retry_enabled, notification_type } = await parseJsonBody(c, body);
    const endpoint = new URL(push.to.endpoint);
    if (!hostAllowed(endpoint, deps.config.PUSH_ENDPOINT_HOSTS)) {
      throw new ApiError(
        400,
        `payload.to.endpoint: ${endpoint.host} is not an allowed push service (PUSH_ENDPOINT_HOSTS)`,
      );
    }
    return answerSend(c, deps, {
      label: "Push",
      dryRun: dry_run,
      idempotencyKey,
      content: {
        channel: "push",
        recipient: push.to.endpoint,
        sender: deps.config.VAPID_SUBJECT,
        push: {
          keys: push.to.keys,
          title: push.title,
          body: push.body,
          data: push.data ?? null,
          ttlSeconds: push.ttl ?? null,
        },
      },
      retryEnabled: retry_enabled,
      notificationType: notification_type,
    });
  },
});
