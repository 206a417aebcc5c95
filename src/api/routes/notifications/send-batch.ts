import { createRoute } from "@hono/zod-openapi";
import { z } from "zod";
import type { Channel, Measures } from "../../../channels/channel.js";
import { channels } from "../../../channels/index.js";
import { ApiError, describeZodError } from "../../../http/errors.js";
import { readJsonItems } from "../../../http/json-body.js";
import {
  API_KEY_ERRORS,
  errorResponses,
  JSON_BODY_ERRORS,
  jsonContent,
  RATE_LIMIT_HEADERS,
  SERVER_ERRORS,
} from "../../../http/openapi.js";
import { type AcceptRequest, acceptMessages } from "../../../messages/accept.js";
import { quotaRefusal } from "../../middleware/daily-quota.js";
import { type LimitState, limitHeaders } from "../../middleware/limit-headers.js";
import { bucketRefusal, bucketState } from "../../middleware/rate-limit.js";
import type { QuotaTaken, SendLimits } from "../../middleware/send-limits.js";
import { type AppContext, type AppDeps, defineRoute } from "../../types.js";
import {
  dryRunQuery,
  idempotencyKeyHeader,
  smsEncodingField,
  smsSegmentsField,
} from "../../wire/common-schemas.js";
import { checkSend, type SendRequest, sendBody } from "./send-route.js";

/**
 * `POST /api/v1/notifications/<channel>/batch` (issue 20, docs/decisions/0045): up to
 * {@link MAX_BATCH_ITEMS} sends of one channel in one request, each item the body of the single
 * send plus its own `idempotency_key`. Every item is checked on its own and gets a result of its
 * own, in order; the valid ones are accepted together, in one statement (one transaction, one
 * round trip), whatever the others are. The send rate and the daily quota count items.
 */

export const MAX_BATCH_ITEMS = 500;
/** 500 items of about 8 KiB each: an SMS item is a few hundred bytes, an e-mail's a few KiB. */
export const MAX_BATCH_BODY_BYTES = 4 * 1024 * 1024;

/** One item's result: accepted (or replayed), valid (a dry run), or refused with its own status. */
type ItemResult =
  | ({ status: 202; request_id: string; replayed?: true } & Partial<Measures>)
  | ({ status: 200; message: string } & Partial<Measures>)
  | { status: 400 | 422 | 429 | 503; error: string; retry_after?: number };

/** An SMS item's segments and encoding, as the single send's 202 says them (docs/decisions/0043). */
const measured = { segments: smsSegmentsField.optional(), encoding: smsEncodingField.optional() };

const itemResult = z.union([
  z.object({
    ...measured,
    status: z.literal(202),
    request_id: z.uuid().meta({ description: "The message id: read it at /api/v1/messages/{message_id}" }),
    replayed: z.literal(true).optional().meta({
      description: "The item's `idempotency_key` was used before with the same body: its first answer",
    }),
  }),
  z.object({
    ...measured,
    status: z.literal(200),
    message: z.string().meta({ description: "`?dry_run=true`: valid" }),
  }),
  z.object({
    status: z.union([z.literal(400), z.literal(422), z.literal(429), z.literal(503)]),
    error: z.string(),
    retry_after: z
      .int()
      .optional()
      .meta({ description: "429: seconds until the item may be sent again (the batch's `Retry-After`)" }),
  }),
]);

function batchItem(channel: Channel) {
  return sendBody(channel.payload).extend({
    idempotency_key: idempotencyKeyHeader.meta({
      description:
        "The item's own `Idempotency-Key`: the same key with the same item replays its first result within 24 h; with another, 422",
    }),
  });
}

function batchRoute(channel: Channel) {
  const item = batchItem(channel);
  return defineRoute({
    auth: "api-key",
    rateLimit: "send-items",
    maxBodyBytes: MAX_BATCH_BODY_BYTES,
    definition: createRoute({
      method: "post",
      path: `${channel.route.path}/batch`,
      tags: ["Notifications"],
      summary: `Send up to ${MAX_BATCH_ITEMS} ${channel.label === "Email" ? "e-mails" : `${channel.label} notifications`} in one request`,
      description:
        `A JSON array of 1 to ${MAX_BATCH_ITEMS} items, each the body of \`POST ${channel.route.path}\` plus an optional ` +
        "`idempotency_key`. Each item is checked on its own and answered in `results`, in order: `202` with its " +
        "`request_id`, or its own `400`/`422`/`429`/`503` with `error`. The valid items are committed together, " +
        "in one transaction, whatever the others are. The send rate (`SEND_RATE_LIMIT`) and the daily quota count " +
        "items: an item past either is a `429` (the batch answers `Retry-After`), and the items before it are sent.",
      request: {
        query: z.object({ dry_run: dryRunQuery }),
        body: { required: true, content: jsonContent(z.array(item).min(1).max(MAX_BATCH_ITEMS)) },
      },
      responses: {
        207: {
          description: "One result per item, in order",
          headers: {
            ...RATE_LIMIT_HEADERS,
            "Retry-After": {
              description: "When some items were refused by a limit (429): seconds until they may be sent",
              schema: { type: "integer" },
            },
          },
          content: jsonContent(z.object({ results: z.array(itemResult) })),
        },
        ...errorResponses(
          {
            400: `Malformed JSON, a body that is not an array of 1 to ${MAX_BATCH_ITEMS} items, a bad \`dry_run\``,
          },
          API_KEY_ERRORS,
          JSON_BODY_ERRORS,
          SERVER_ERRORS,
        ),
      },
    }),
    async handler(c, deps) {
      const { dry_run: dryRun } = c.req.valid("query");
      const organizationId = c.get("organization").id;
      const items = await readJsonItems(c, MAX_BATCH_ITEMS);
      const results = new Array<ItemResult>(items.length);
      const valid: Array<{ index: number; send: SendRequest }> = [];
      const checked = await Promise.all(
        items.map(({ item: raw, problem }) =>
          checkItem(channel, item, raw, problem, deps, organizationId, dryRun),
        ),
      );
      checked.forEach((outcome, index) => {
        if ("send" in outcome) valid.push({ index, send: outcome.send });
        else results[index] = outcome;
      });
      const { admitted, quota } = await admit(
        c,
        deps,
        c.get("sendLimits"),
        organizationId,
        valid,
        results,
        dryRun,
      );
      const units = admitted.filter((item) => item.unit).length;
      if (dryRun) {
        for (const { index, send } of admitted)
          results[index] = {
            status: 200,
            message: `${send.label} notification is valid; nothing was stored or sent (dry run)`,
            ...send.measures,
          };
      } else if (admitted.length > 0) {
        let accepted: ItemResult[];
        try {
          accepted = await acceptAll(
            deps,
            c,
            admitted.map(({ send }) => send),
          );
        } catch (error) {
          // Nothing was written (one statement): the quota's units go back.
          quota?.giveBack(units);
          throw error;
        }
        admitted.forEach(({ index, send }, n) => {
          const result = accepted[n] as ItemResult;
          results[index] = result.status === 202 ? { ...result, ...send.measures } : result;
        });
        // Items that took a unit and no message (replays, conflicts): their units go back.
        quota?.giveBack(
          admitted.filter(({ unit }, n) => {
            const result = accepted[n] as ItemResult;
            return unit && (result.status !== 202 || result.replayed === true);
          }).length,
        );
      }
      return c.json({ results }, 207);
    },
  });
}

/**
 * One item checked alone: what in it Postgres could not take, its schema, then what `checkSend`
 * checks (`send_at`, the channel's refusal, the sender). Its send, or its result (400, 422).
 */
async function checkItem(
  channel: Channel,
  schema: ReturnType<typeof batchItem>,
  raw: unknown,
  problem: string | undefined,
  deps: AppDeps,
  organizationId: string,
  dryRun: boolean,
): Promise<{ send: SendRequest } | ItemResult> {
  if (problem) return { status: 400, error: problem };
  const parsed = schema.safeParse(raw);
  if (!parsed.success) return { status: 400, error: describeZodError(parsed.error) };
  try {
    const send = await checkSend(channel, parsed.data, deps, organizationId, {
      idempotencyKey: parsed.data.idempotency_key,
      dryRun,
    });
    return { send };
  } catch (error) {
    if (error instanceof ApiError && (error.status === 400 || error.status === 422))
      return { status: error.status, error: error.message };
    throw error;
  }
}

/** Accepts the checked items together; each one's result, in order. */
async function acceptAll(deps: AppDeps, c: AppContext, sends: SendRequest[]): Promise<ItemResult[]> {
  const organization = c.get("organization");
  const requests: AcceptRequest[] = sends.map((send) => ({
    organization,
    content: send.content,
    retryEnabled: send.retryEnabled,
    notificationType: send.notificationType,
    idempotencyKey: send.idempotencyKey,
    sendAt: send.sendAt,
  }));
  const outcomes = await acceptMessages(deps, requests);
  const unanswered = outcomes.find((outcome) => outcome.outcome === "unanswered");
  if (unanswered)
    deps.logger.error(
      { err: unanswered.error, requestId: c.get("requestId") },
      "batch send: items whose held idempotency_key could not be read back were answered 503",
    );
  return outcomes.map(resultOf);
}

function resultOf(outcome: Awaited<ReturnType<typeof acceptMessages>>[number]): ItemResult {
  switch (outcome.outcome) {
    case "accepted":
      return { status: 202, request_id: outcome.messageId };
    case "replayed":
      return { status: 202, request_id: outcome.messageId, replayed: true };
    case "idempotency_conflict":
      return { status: 422, error: "idempotency_key was already used with a different item" };
    case "unanswered":
      return { status: 503, error: "Could not read back what idempotency_key recorded; retry the item" };
  }
}

/** A checked item on its way to be accepted; `unit`: it took one of the day's quota. */
interface Admitted {
  index: number;
  send: SendRequest;
  unit: boolean;
}

/**
 * Takes the send rate's tokens, then the day's quota (not for a dry run), for the checked items,
 * the first ones first: the others are refused with the 429 of the limit that refused them (its
 * message and `retry_after`), except the retry of an accepted item (its `idempotency_key` held),
 * which goes on to its replay, as a single send's does. The batch's answer carries the
 * `RateLimit-*` fields of the limit closest to exhaustion, both policies, and `Retry-After` (the
 * longest) when an item was refused. Returns the items admitted and the quota's take, whose units
 * of items that take no message are given back.
 */
async function admit(
  c: AppContext,
  deps: AppDeps,
  limits: SendLimits | undefined,
  organizationId: string,
  checked: Array<{ index: number; send: SendRequest }>,
  results: ItemResult[],
  dryRun: boolean,
): Promise<{ admitted: Admitted[]; quota?: QuotaTaken }> {
  const states: LimitState[] = [];
  /** How many of the first items each limit let through, and what it answers the others. */
  const cuts: Array<{ granted: number; refusal: ApiError }> = [];
  let count = checked.length;
  if (limits?.rate && count > 0) {
    limits.rate.warnIfRedisAway();
    const taken = await limits.rate.take(organizationId, count);
    const state = bucketState(limits.rate, taken);
    states.push(state);
    if (taken.granted < count)
      cuts.push({ granted: taken.granted, refusal: bucketRefusal(limits.rate, state) });
    count = Math.min(count, taken.granted);
  }
  let quota: QuotaTaken | undefined;
  if (limits?.quota && !dryRun && count > 0) {
    quota = await limits.quota.take(organizationId, count);
    if (quota.counted) {
      states.push(quota.state);
      if (quota.granted < count)
        cuts.push({ granted: quota.granted, refusal: quotaRefusal(limits.quota.quota, quota) });
      count = Math.min(count, quota.granted);
    }
  }
  const admitted: Admitted[] = checked
    .slice(0, count)
    .map((item) => ({ ...item, unit: quota !== undefined }));
  let retryAfter = 0;
  await Promise.all(
    checked.slice(count).map(async (item, n) => {
      const { idempotencyKey } = item.send;
      const held =
        !dryRun &&
        idempotencyKey !== undefined &&
        (await deps.store.holdsIdempotencyKey(organizationId, idempotencyKey, deps.now()));
      if (held) return void admitted.push({ ...item, unit: false });
      // The first limit, in the order they were taken, whose grant this item is past refused it.
      const position = count + n;
      const cut = cuts.find((limit) => position >= limit.granted);
      const seconds = Number(cut?.refusal.headers["Retry-After"] ?? 1);
      retryAfter = Math.max(retryAfter, seconds);
      results[item.index] = {
        status: 429,
        error: cut?.refusal.message ?? "Too many requests",
        retry_after: seconds,
      };
    }),
  );
  if (retryAfter > 0) c.header("Retry-After", String(retryAfter));
  const [first, ...others] = states;
  if (first) {
    const tightest = others.reduce((a, b) => (b.remaining < a.remaining ? b : a), first);
    for (const [name, value] of Object.entries(limitHeaders(tightest))) c.header(name, value);
    c.header("RateLimit-Policy", states.map((state) => state.policy).join(", "));
  }
  admitted.sort((a, b) => a.index - b.index);
  return { admitted, quota };
}

/** One batch endpoint per channel, in the channels' order. */
export const sendBatchRoutes = channels.map((channel) => batchRoute(channel));
