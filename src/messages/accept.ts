import { hash } from "node:crypto";
import type { Measures } from "../channels/channel.js";
import { decide } from "../domain/decide.js";
import type { MessageContent } from "../domain/events.js";
import { type NotificationType, QUEUE_PRIORITY, TIME_TO_LIVE_MS, tierOf } from "../domain/priority.js";
import { isScheduledAhead } from "../domain/schedule.js";
import { fold, initialState } from "../domain/state.js";
import type { Metrics } from "../observability/metrics.js";
import type { PendingAccept, Unanswered } from "../store/accept-batcher.js";
import type { MessageStore } from "../store/message-store.js";
import type { Organization } from "../store/organizations.js";
import { toMessageRow } from "../store/projection.js";

export interface AcceptDeps {
  store: Pick<MessageStore, "accept">;
  now: () => Date;
  newId: () => string;
  metrics?: Pick<Metrics, "messageAccepted">;
}

/** `Omit` applied to each member of a union, so the union's discriminant survives. */
type DistributiveOmit<T, K extends PropertyKey> = T extends unknown ? Omit<T, K> : never;

/** What a send request says about its channel: the content minus what acceptance fills in. */
export type ChannelContent = DistributiveOmit<
  MessageContent,
  "id" | "organizationId" | "productId" | "priority" | "notificationType" | "retryEnabled" | "expiresAt"
>;

export interface AcceptRequest {
  organization: Organization;
  content: ChannelContent;
  retryEnabled: boolean;
  notificationType: NotificationType | undefined;
  /** The request's `Idempotency-Key`, if it has one. */
  idempotencyKey?: string;
  /** `send_at`, already checked against the clock (src/domain/schedule.ts): no attempt before it. */
  sendAt?: Date;
}

export type AcceptResult =
  | { outcome: "accepted"; messageId: string }
  | { outcome: "replayed"; messageId: string }
  | { outcome: "idempotency_conflict" };

/**
 * Accepts a message: commits its `accepted` event, its record, its delivery-outbox row and the
 * idempotency claim together, sharing the statement (and the commit) with whatever other accepts
 * arrive at the same moment. The delivery job is added by the worker's outbox relay, so Redis
 * being slow or down never touches this path.
 */
export async function acceptMessage(deps: AcceptDeps, request: AcceptRequest): Promise<AcceptResult> {
  const pending = pendingAccept(deps, request);
  const result = await deps.store.accept(pending);
  if (result.outcome === "accepted")
    deps.metrics?.messageAccepted(pending.event.data.channel, pending.row.priority);
  return result;
}

/**
 * Accepts the messages of a batch request together: one statement, one transaction, whatever
 * else arrives meanwhile (src/store/message-store.ts `acceptMany`). One result per request, in
 * order; `unanswered` for one whose held `Idempotency-Key` could not be read back (nothing of it
 * was written: its retry is answered).
 */
export async function acceptMessages(
  deps: AcceptDeps & { store: Pick<MessageStore, "acceptMany"> },
  requests: readonly AcceptRequest[],
): Promise<Array<AcceptResult | Unanswered>> {
  const pendings = requests.map((request) => pendingAccept(deps, request));
  const results = await deps.store.acceptMany(pendings);
  results.forEach((result, index) => {
    const pending = pendings[index] as PendingAccept;
    if (result.outcome === "accepted")
      deps.metrics?.messageAccepted(pending.event.data.channel, pending.row.priority);
  });
  return results;
}

/** The message a request makes: its content, decided into its `accepted` event, with its record. */
function pendingAccept(deps: Pick<AcceptDeps, "now" | "newId">, request: AcceptRequest): PendingAccept {
  const now = deps.now();
  const messageId = deps.newId();
  const priority = tierOf(request.notificationType);
  const { sendAt } = request;
  const scheduled = isScheduledAhead(sendAt, now);
  // The tier's time-to-live counts from `send_at` when the message waits for it.
  const startsAt = scheduled ? sendAt : now;
  // The spread comes last throughout the hot path: V8 builds `{ ...a, b }` far more slowly than
  // `{ b, ...a }` (bench/micro/object-spread.ts).
  const content: MessageContent = {
    id: messageId,
    organizationId: request.organization.id,
    productId: request.organization.productId,
    priority,
    notificationType: request.notificationType ?? null,
    retryEnabled: request.retryEnabled,
    sendAt: sendAt?.toISOString(),
    expiresAt: new Date(startsAt.getTime() + TIME_TO_LIVE_MS[priority]).toISOString(),
    ...request.content,
  };
  const decision = decide(initialState, { type: "accept", message: content, now });
  if (!("events" in decision)) throw new Error(`accept refused: ${JSON.stringify(decision)}`);
  const [event] = decision.events;
  if (event?.type !== "accepted") throw new Error("accept decided something other than one accepted event");
  return {
    event,
    row: toMessageRow(fold([event])),
    queuePriority: QUEUE_PRIORITY[priority],
    dueAt: scheduled ? sendAt.toISOString() : undefined,
    idempotency: request.idempotencyKey
      ? { key: request.idempotencyKey, requestHash: requestHash(request) }
      : undefined,
  };
}

/** What acceptance measured of a content (an SMS's segments and encoding), which no request hash includes. */
const MEASURED: ReadonlySet<string> = new Set<keyof Measures>(["segments", "encoding"]);

/**
 * What the message will be, defaults applied, hashed: the same key with the same hash replays.
 * What was measured of the content is left out: it follows from what is hashed (an SMS's body),
 * and the keys held across the upgrade that began measuring it must still replay. (No leading
 * spread, which V8 builds slowly; the key order must not change, for the same reason.)
 */
export function requestHash({
  content,
  retryEnabled,
  notificationType,
  sendAt,
}: Pick<AcceptRequest, "content" | "retryEnabled" | "notificationType" | "sendAt">): string {
  const hashed: Record<string, unknown> = {};
  const fields = content as unknown as Record<string, unknown>;
  for (const name in fields) if (!MEASURED.has(name)) hashed[name] = fields[name];
  hashed.retryEnabled = retryEnabled;
  hashed.notificationType = notificationType;
  // `sendAt` only when there is one: the hashes of unscheduled sends stay what they were.
  if (sendAt) hashed.sendAt = sendAt.toISOString();
  return hash("sha256", JSON.stringify(hashed), "hex");
}
