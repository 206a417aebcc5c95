import type { Queue } from "bullmq";
import type { Database } from "../../db/client.js";
import { driverOf } from "../../db/driver.js";
import { decide } from "../domain/decide.js";
import type { MessageContent } from "../domain/events.js";
import { type NotificationType, QUEUE_PRIORITY, TIME_TO_LIVE_MS, tierOf } from "../domain/priority.js";
import { fold, initialState } from "../domain/state.js";
import type { Metrics } from "../observability/metrics.js";
import type { Config } from "../runtime/config.js";
import type { Logger } from "../runtime/logger.js";
import { AcceptBatcher } from "../store/accept-batcher.js";
import type { DeliveryJobData } from "../store/delivery-queue.js";
import { databaseQueueLimits, onePerLimits, type QueueLimits } from "../store/micro-batch.js";
import type { Organization } from "../store/organizations.js";
import { toMessageRow } from "../store/projection.js";

export const IDEMPOTENCY_WINDOW_MS = 24 * 60 * 60 * 1000;

export interface AcceptDeps {
  db: Database;
  /** Only its prefix is used: the job itself is added by the worker's outbox relay. */
  queue: Pick<Queue<DeliveryJobData>, "opts">;
  logger: Logger;
  now: () => Date;
  newId: () => string;
  metrics?: Pick<Metrics, "messageAccepted">;
  /**
   * Bounds the accepts waiting while a statement runs (`DATABASE_QUEUE_LIMIT`, the request
   * deadline): while one stalls, one more send is refused at once (503), and a send the deadline
   * has answered 503 is dropped from the queue instead of being committed later. Without it the
   * queue has no bound.
   */
  config?: Pick<Config, "DATABASE_QUEUE_LIMIT" | "REQUEST_TIMEOUT_MS">;
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
  idempotency?: { key: string; requestHash: string };
}

export type AcceptResult =
  | { outcome: "accepted"; messageId: string }
  | { outcome: "replayed"; messageId: string }
  | { outcome: "idempotency_conflict" };

/** One batcher per database handle and queue limits: every request of the process shares its batches. */
const batcherFor = onePerLimits(
  (db: Database, limits: QueueLimits) =>
    new AcceptBatcher(driverOf(db), { idempotencyWindowMs: IDEMPOTENCY_WINDOW_MS, ...limits }),
);

/**
 * Accepts a message: commits its `accepted` event, its record, its delivery-outbox row and the
 * idempotency claim together, sharing the statement (and the commit) with whatever other accepts
 * arrive at the same moment. The delivery job is added by the worker's outbox relay, so Redis
 * being slow or down never touches this path.
 */
export async function acceptMessage(deps: AcceptDeps, request: AcceptRequest): Promise<AcceptResult> {
  const now = deps.now();
  const messageId = deps.newId();
  const priority = tierOf(request.notificationType);
  // The spread comes last throughout the hot path: Node 20's V8 builds `{ ...a, b }` about 40 times
  // slower than `{ b, ...a }` (bench/micro/object-spread.ts).
  const content: MessageContent = {
    id: messageId,
    organizationId: request.organization.id,
    productId: request.organization.productId,
    priority,
    notificationType: request.notificationType ?? null,
    retryEnabled: request.retryEnabled,
    expiresAt: new Date(now.getTime() + TIME_TO_LIVE_MS[priority]).toISOString(),
    ...request.content,
  };
  const decision = decide(initialState, { type: "accept", message: content, now });
  if (!("events" in decision)) throw new Error(`accept refused: ${JSON.stringify(decision)}`);
  const [event] = decision.events;
  if (event?.type !== "accepted") throw new Error("accept decided something other than one accepted event");

  const limits = deps.config ? databaseQueueLimits(deps.config) : {};
  const result = await batcherFor(deps.db, limits).commit({
    event,
    row: toMessageRow(fold([event])),
    queuePrefix: deps.queue.opts.prefix ?? "bull",
    queuePriority: QUEUE_PRIORITY[priority],
    idempotency: request.idempotency,
  });
  if (result.outcome === "accepted") deps.metrics?.messageAccepted(content.channel, priority);
  return result;
}
