import { createRoute } from "@hono/zod-openapi";
import { z } from "zod";
import type { Channel, Measures } from "../../../channels/channel.js";
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
  smsEncodingField,
  smsSegmentsField,
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
  /** The channel measures its content (an SMS's segments and encoding): the answers say them. */
  measured: boolean;
}) {
  const measures = options.measured ? { segments: smsSegmentsField, encoding: smsEncodingField } : {};
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
            ...measures,
          }),
        ),
      },
      200: {
        description: "`?dry_run=true`: the request is valid; nothing was stored or sent",
        content: jsonContent(z.object({ message: z.string(), ...measures })),
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
  /**
   * What the channel measured of the content: part of every answer. A replay says what the
   * request says, as the message it replays was accepted with: the same key and body hash mean
   * the same body, so the same count.
   */
  measures: Measures | undefined;
  retryEnabled: boolean;
  notificationType: NotificationType | undefined;
  /** `send_at`, already checked against the clock ({@link checkSend}). */
  sendAt: Date | undefined;
}

/** A send's body as {@link sendBody} validated it. */
export type SendBody = z.output<ReturnType<typeof sendBody<z.ZodType>>>;

/**
 * The checks of a validated send (a request's, or a batch item's) that need the clock, the
 * channel's rules or the database: `send_at`'s range and the channel's own refusal of the content
 * (400: a body over `SMS_MAX_SEGMENTS`), then the sender, when senders must be verified (422). All
 * are waived for the retry of an accepted send (its `Idempotency-Key` held), which gets its replay
 * even once its `send_at` has passed, the configuration refuses it or its sender is gone. Returns
 * what to accept; throws the ApiError.
 */
export async function checkSend(
  channel: Channel,
  request: SendBody,
  deps: AppDeps,
  organizationId: string,
  options: { idempotencyKey: string | undefined; dryRun: boolean },
): Promise<SendRequest> {
  const content = channel.content(request.payload, deps.config);
  const refused = sendAtRefusal(request.send_at, deps) ?? channel.refuse?.(content, deps.config);
  const unverified = deps.senders.required
    ? await deps.senders.refusal(organizationId, channel.sender?.(content, deps.config))
    : undefined;
  if (refused !== undefined || unverified !== undefined) {
    const replay =
      !options.dryRun &&
      options.idempotencyKey !== undefined &&
      (await deps.store.holdsIdempotencyKey(organizationId, options.idempotencyKey, deps.now()));
    if (!replay && refused !== undefined) throw new ApiError(400, refused);
    if (!replay && unverified !== undefined) throw new ApiError(422, unverified);
  }
  return {
    label: channel.label,
    dryRun: options.dryRun,
    idempotencyKey: options.idempotencyKey,
    content,
    measures: channel.measures?.(content),
    retryEnabled: request.retry_enabled,
    notificationType: request.notification_type,
    sendAt: request.send_at,
  };
}

/** Why `send_at` cannot be taken now (src/domain/schedule.ts), if it cannot. */
function sendAtRefusal(sendAt: Date | undefined, deps: AppDeps): string | undefined {
  if (sendAt === undefined) return undefined;
  return refuseSendAt(sendAt, deps.now(), scheduleHorizonMs(deps.config.MESSAGE_RETENTION_DAYS));
}

/** Accepts a validated send request and answers it: 200 (dry run), 202, replayed 202 or 422. */
export async function answerSend(c: AppContext, deps: AppDeps, request: SendRequest): Promise<Response> {
  const { label, content, measures, retryEnabled, notificationType, sendAt } = request;
  if (request.dryRun) {
    const message = `${label} notification is valid; nothing was stored or sent (dry run)`;
    return c.json(measures ? { message, ...measures } : { message }, 200);
  }

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
      return c.json(acceptedAnswer(accepted, result.messageId, measures), 202);
    case "replayed":
      c.header("Idempotent-Replayed", "true");
      return c.json(acceptedAnswer(accepted, result.messageId, measures), 202);
    case "idempotency_conflict":
      throw new ApiError(422, "Idempotency-Key was already used with a different request body");
  }
}

function acceptedAnswer(message: string, requestId: string, measures: Measures | undefined) {
  // The e-mail and push 202s stay exactly `{ message, request_id }`.
  return measures
    ? { message, request_id: requestId, segments: measures.segments, encoding: measures.encoding }
    : { message, request_id: requestId };
}
