import { z } from "zod";
import type { Config } from "../../runtime/config.js";
import type { ContentOf } from "../channel.js";
import { anyJson, payloadObjectError } from "../request.js";
import { pushPayloadText } from "./payload.js";

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

/** A push subscription's endpoint, as a send takes it (and the suppression list names it). */
export const pushEndpoint = z
  .url({ protocol: /^https?$/, error: "must be an http(s) URL" })
  .max(2048, "must be at most 2048 characters");

const subscription = z
  .strictObject(
    {
      endpoint: pushEndpoint.meta({
        description: "The push service URL the browser gave (`PushSubscription.endpoint`)",
      }),
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

/** A push send request's `payload`: the browser's subscription and the notification. */
export const pushPayload = z
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

/** A content the schema accepted is refused all the same when its push service is not allowed. */
export function refusePush(content: ContentOf<"push">, config: Config): string | undefined {
  const endpoint = new URL(content.recipient);
  if (hostAllowed(endpoint, config.PUSH_ENDPOINT_HOSTS)) return undefined;
  return `payload.to.endpoint: ${endpoint.host} is not an allowed push service (PUSH_ENDPOINT_HOSTS)`;
}

/** The message's content: the sender is the VAPID subject, as push services see it. */
export function pushContent(payload: z.output<typeof pushPayload>, config: Config): ContentOf<"push"> {
  return {
    channel: "push",
    recipient: payload.to.endpoint,
    sender: config.VAPID_SUBJECT,
    push: {
      keys: payload.to.keys,
      title: payload.title,
      body: payload.body,
      data: payload.data ?? null,
      ttlSeconds: payload.ttl ?? null,
    },
  };
}
