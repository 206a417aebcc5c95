import { createRoute } from "@hono/zod-openapi";
import { z } from "zod";
import type { Channel } from "../../../channels/channel.js";
import type { NotificationType } from "../../../domain/priority.js";
import { refuseSendAt, scheduleHorizonMs } from "../../../domain/schedule.js";
import { ApiError } from "../../../http/errors.js";
import {
  API_KEY_ERRORS,
  errorResponses,
  JSON_BODY_ERRORS,
  jsonContent,
  SERVER_ERRORS,
} from "../../../http/openapi.js";
import { acceptMessage, type ChannelContent } from "../../../messages/accept.js";
import { markMessageAccepted } from "../../middleware/daily-quota.js";
import type { AppContext, AppDeps } from "../../types.js";
import {
  dryRunQuery,
  idempotencyKeyHeader,
  notificationType,
  sendAtField,
} from "../../wire/common-schemas.js";

/**
 * What every send endpoint shares: the request's top level around its channel's `payload`, the
 * OpenAPI definition, and the answer (dry run, idempotent replay, 202). `send.ts` builds one
 * endpoint per channel from these; the channel's folder holds its payload schema and how that
 * payload becomes the message's content.
 */

/** A send request's body: the channel's `payload`, then the fields every channel has. */
export function sendBody<P extends z.ZodType>(payload: P) {
  return z.strictObject({
    payload,
    retry_enabled: z.boolean({ error: "must be true or false" }).default(true),
    notification_type: notificationType.optional(),
    send_at: sendAtField.optional(),
  });
}

export function sendRouteDefinition<B extends z.ZodType>(options: {
  path: string;
  summary: string;
  description: string;
  body: B;
  acceptedMessage: string;
}) {
  return createRoute({
    method: "post",
    path: options.path,
    tags: ["Notifications"],
    summary: options.summary,
    description:
      `${options.description} The 202 is sent once the message's accepted event is committed; a worker ` +
      "then delivers it, retrying transient failures. The tier (`payload.priority` of the record) comes " +
      "from `notification_type`.",
    request: {
      query: z.object({ dry_run: dryRunQuery }),
      headers: z.object({ "Idempotency-Key": idempotencyKeyHeader }),
      body: { required: true, content: jsonContent(options.body) },
    },
    responses: {
      202: {
        description: "Accepted (or, for a repeated `Idempotency-Key` and body, the first 202 replayed)",
        headers: {
          "Idempotent-Replayed": {
            description: "`true` when this is the replay of an earlier request's 202",
            schema: { type: "string", enum: ["true"] },
          },
        },
        content: jsonContent(
          z.object({
            message: z.literal(options.acceptedMessage),
            request_id: z
              .uuid()
              .meta({ description: "The message id: read it at /api/v1/messages/{message_id}" }),
          }),
        ),
      },
      200: {
        description: "`?dry_run=true`: the request is valid; nothing was stored or sent",
        content: jsonContent(z.object({ message: z.string() })),
      },
      ...errorResponses(
        {
          400: "Malformed JSON, a field that breaks the schema, an unknown field (named), a bad `dry_run` or `Idempotency-Key`, a `send_at` in the past or too far ahead",
        },
        API_KEY_ERRORS,
        JSON_BODY_ERRORS,
        {
          422: "`Idempotency-Key` already used with a different body; or, with `SENDER_VERIFICATION=required`, a sender (`from_email`'s domain, an SMS `sender`) the organization has not verified (named)",
        },
        {
          429:
            "Over the organization's send rate (`SEND_RATE_LIMIT` a second, default 100, all channels together, dry runs " +
            "included) or its daily quota (`SEND_DAILY_QUOTA` messages accepted per UTC day, default 100,000); retry after " +
            "`Retry-After` seconds (for the quota: the next UTC midnight)",
        },
        SERVER_ERRORS,
      ),
    },
  });
}

export interface SendRequest {
  /** "SMS", "Email", "Push": the start of the answers' `message`. */
  label: string;
  dryRun: boolean;
  idempotencyKey: string | undefined;
  content: ChannelContent;
  retryEnabled: boolean;
  notificationType: NotificationType | undefined;
  /** `send_at`, already checked against the clock ({@link checkedSendAt}). */
  sendAt: Date | undefined;
}

/** A send's body as {@link sendBody} validated it. */
export type SendBody = z.output<ReturnType<typeof sendBody<z.ZodType>>>;

/**
 * The checks of a validated send (a request's, or a batch item's) that need the clock, the
 * channel's rules or the database, in this order: `send_at`'s range, the channel's own refusal
 * (400), then the sender, when senders must be verified (422, unless the request is the retry of
 * an accepted one: its `Idempotency-Key` held). Returns what to accept; throws the ApiError.
 */
export async function checkSend(
  channel: Channel,
  request: SendBody,
  deps: AppDeps,
  organizationId: string,
  options: { idempotencyKey: string | undefined; dryRun: boolean },
): Promise<SendRequest> {
  const sendAt = checkedSendAt(request.send_at, deps);
  const refused = channel.refuse?.(request.payload, deps.config);
  if (refused !== undefined) throw new ApiError(400, refused);
  const content = channel.content(request.payload, deps.config);
  if (deps.senders.required) {
    const claim = channel.sender?.(content, deps.config);
    const unverified = await deps.senders.refusal(organizationId, claim);
    // The retry of an accepted send gets its replay, even once its sender is gone.
    const replay =
      unverified !== undefined &&
      !options.dryRun &&
      options.idempotencyKey !== undefined &&
      (await deps.store.holdsIdempotencyKey(organizationId, options.idempotencyKey, deps.now()));
    if (unverified !== undefined && !replay) throw new ApiError(422, unverified);
  }
  return {
    label: channel.label,
    dryRun: options.dryRun,
    idempotencyKey: options.idempotencyKey,
    content,
    retryEnabled: request.retry_enabled,
    notificationType: request.notification_type,
    sendAt,
  };
}

/** `send_at` if the installation takes it now; a 400 naming what is wrong otherwise. */
function checkedSendAt(sendAt: Date | undefined, deps: AppDeps): Date | undefined {
  if (sendAt === undefined) return undefined;
  const refused = refuseSendAt(sendAt, deps.now(), scheduleHorizonMs(deps.config.MESSAGE_RETENTION_DAYS));
  if (refused !== undefined) throw new ApiError(400, refused);
  return sendAt;
}

/** Accepts a validated send request and answers it: 200 (dry run), 202, replayed 202 or 422. */
export async function answerSend(c: AppContext, deps: AppDeps, request: SendRequest): Promise<Response> {
  const { label, content, retryEnabled, notificationType, sendAt } = request;
  if (request.dryRun)
    return c.json({ message: `${label} notification is valid; nothing was stored or sent (dry run)` }, 200);

  const result = await acceptMessage(deps, {
    organization: c.get("organization"),
    content,
    retryEnabled,
    notificationType,
    idempotencyKey: request.idempotencyKey,
    sendAt,
  });
  const accepted = `${label} notification accepted`;
  switch (result.outcome) {
    case "accepted":
      markMessageAccepted(c);
      return c.json({ message: accepted, request_id: result.messageId }, 202);
    case "replayed":
      c.header("Idempotent-Replayed", "true");
      return c.json({ message: accepted, request_id: result.messageId }, 202);
    case "idempotency_conflict":
      throw new ApiError(422, "Idempotency-Key was already used with a different request body");
  }
}
