import { z } from "zod";
import { MAX_WEBHOOK_URL_LENGTH, WEBHOOK_EVENT_TYPES, webhookUrlProblem } from "../../../domain/webhooks.js";
import { ApiError } from "../../../http/errors.js";
import { type ErrorStatus, JSON_BODY_ERRORS, oneByIdErrors } from "../../../http/openapi.js";
import type { WebhookDeps } from "../../../messages/webhooks.js";
import type { StoredWebhookEndpoint, WebhookAttempt } from "../../../store/webhooks.js";
import type { AppDeps } from "../../types.js";
import { pageLimit, uuidParam } from "../../wire/common-schemas.js";

/**
 * What the webhook endpoint routes share: the records they answer with, the `{id}` parameter,
 * the fields of a body, and the 404 of an endpoint the key's organization does not have
 * (docs/decisions/0035).
 */

export const endpointIdParams = z.object({ id: uuidParam("id") });

export const webhookEndpointRecord = z
  .object({
    id: z.uuid(),
    url: z.string(),
    events: z
      .array(z.enum(WEBHOOK_EVENT_TYPES))
      .nullable()
      .meta({ description: "The event types it receives; null: every type" }),
    description: z.string().nullable(),
    enabled: z.boolean(),
    disabled_reason: z.string().nullable().meta({
      description: "Why the service disabled it; null when enabled or disabled by the organization",
    }),
    previous_secret_expires_at: z.iso
      .datetime()
      .nullable()
      .meta({ description: "Until then the secret a rotation replaced signs beside the current one" }),
    created_at: z.iso.datetime(),
    updated_at: z.iso.datetime(),
  })
  .meta({ id: "WebhookEndpoint" });

export const secretField = z.string().meta({
  description:
    "The signing secret (`whsec_` + base64 of 32 random bytes), shown in full only in this answer; " +
    "give it to a Standard Webhooks library to verify deliveries",
  example: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
});

export const webhookEndpointWithSecret = webhookEndpointRecord
  .extend({ secret: secretField })
  .meta({ id: "WebhookEndpointWithSecret" });

export function toEndpointRecord(endpoint: StoredWebhookEndpoint): z.output<typeof webhookEndpointRecord> {
  return {
    id: endpoint.id,
    url: endpoint.url,
    events: (endpoint.eventTypes as z.output<typeof webhookEndpointRecord>["events"]) ?? null,
    description: endpoint.description,
    enabled: endpoint.enabled,
    disabled_reason: endpoint.disabledReason,
    previous_secret_expires_at: endpoint.previousSecretExpiresAt?.toISOString() ?? null,
    created_at: endpoint.createdAt.toISOString(),
    updated_at: endpoint.updatedAt.toISOString(),
  };
}

export const webhookAttemptRecord = z
  .object({
    id: z.uuid(),
    event_id: z
      .string()
      .meta({ description: "The `webhook-id` header: the same for every attempt of one event" }),
    event_type: z.string(),
    attempted_at: z.iso.datetime(),
    succeeded: z.boolean().meta({ description: "The endpoint answered 2xx" }),
    status_code: z.int().nullable().meta({ description: "The endpoint's HTTP status; null when none came" }),
    duration_ms: z.int(),
    error: z
      .object({
        class: z.enum([
          "http",
          "redirect",
          "timeout",
          "connection",
          "address_refused",
          "secret_unreadable",
          "not_sendable",
        ]),
        code: z.string().meta({ example: "http_500" }),
      })
      .nullable()
      .meta({
        description:
          "Why it failed: `http` (a status other than 2xx/3xx), `redirect` (a 3xx: never followed), " +
          "`timeout`, `connection` (code as the system names it, e.g. ECONNREFUSED), `address_refused` " +
          "(a private address the operator does not allow), `secret_unreadable` (nothing sent: the secret " +
          "was sealed under another WEBHOOK_SECRET_KEY; rotate it), `not_sendable` (nothing sent)",
      }),
    next_retry_at: z.iso
      .datetime()
      .nullable()
      .meta({ description: "When its event is tried again after this failure; null: not retried" }),
    gave_up: z.boolean().meta({
      description:
        "True on the last attempt of an event that was given up (its retries spent, or the endpoint " +
        "answered 410): the event is not sent again unless recovered",
    }),
  })
  .meta({ id: "WebhookAttempt" });

export function toAttemptRecord(attempt: WebhookAttempt): z.output<typeof webhookAttemptRecord> {
  return {
    id: attempt.id,
    event_id: attempt.eventId,
    event_type: attempt.eventType,
    attempted_at: attempt.attemptedAt.toISOString(),
    succeeded: attempt.errorClass === null,
    status_code: attempt.statusCode,
    duration_ms: attempt.durationMs,
    error:
      attempt.errorClass === null
        ? null
        : {
            class: attempt.errorClass as NonNullable<z.output<typeof webhookAttemptRecord>["error"]>["class"],
            code: attempt.errorCode ?? "",
          },
    next_retry_at: attempt.nextRetryAt?.toISOString() ?? null,
    gave_up: attempt.gaveUp,
  };
}

/** The fields of a create or update body. */
export const endpointFields = {
  url: z
    .string({ error: "must be a string" })
    .max(MAX_WEBHOOK_URL_LENGTH, `must be at most ${MAX_WEBHOOK_URL_LENGTH} characters`)
    .refine((value) => URL.canParse(value), "must be an absolute URL")
    .meta({
      description: "Where events are POSTed: https:// (plain http:// only to hosts the operator allows)",
    }),
  events: z
    .array(z.enum(WEBHOOK_EVENT_TYPES, { error: `must be one of: ${WEBHOOK_EVENT_TYPES.join(", ")}` }))
    .min(1, "must name at least one event type (or be null: every type)")
    .nullable()
    .transform((events) => (events ? [...new Set(events)] : null))
    .meta({ description: "The event types to receive; absent or null: every type" }),
  description: z
    .string({ error: "must be a string" })
    .max(500, "must be at most 500 characters")
    .nullable()
    .meta({ description: "A note of the organization's own" }),
  enabled: z.boolean({ error: "must be true or false" }),
};

/** The 422 of a URL the service may not POST to (HTTP to a host the operator did not allow). */
export function assertUrlAllowed(url: string, deps: AppDeps): void {
  const problem = webhookUrlProblem(new URL(url), deps.config.WEBHOOK_ALLOWED_HOSTS);
  if (problem) throw new ApiError(422, `url: ${problem}`);
}

/** Another organization's endpoint is indistinguishable from an unknown one. */
export function noSuchEndpoint(): ApiError {
  return new ApiError(404, "Webhook endpoint not found");
}

/** The error responses of a route naming one endpoint; `others` add to them or say more. */
export function oneEndpointErrors(...others: Partial<Record<ErrorStatus, string>>[]) {
  return oneByIdErrors("endpoint", ...others);
}

export const BODY_ERRORS = {
  ...JSON_BODY_ERRORS,
  422: "`url` is http:// to a host WEBHOOK_ALLOWED_HOSTS does not name (https:// is required)",
};

/** What the webhook use cases need of the app. */
export function webhookDeps(deps: AppDeps): WebhookDeps {
  return { db: deps.db, now: deps.now, newId: deps.newId, ...deps.webhooks };
}

/** The query of a paginated list: `limit` and the previous page's `next_cursor`. */
export const pageQuery = z.strictObject({
  limit: pageLimit(100, 20, "Items per page"),
  cursor: z
    .string()
    .regex(
      /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/,
      "is not a cursor this endpoint returned",
    )
    .optional()
    .meta({ description: "The previous page's `next_cursor`" }),
});

export const nextCursor = z.string().nullable().meta({ description: "Pass as `cursor` for the next page" });

/** The cursor after a page of `limit` rows: the last one's id, or null when the page was not full. */
export function cursorAfter(rows: readonly { id: string }[], limit: number): string | null {
  return rows.length === limit ? (rows.at(-1)?.id ?? null) : null;
}
