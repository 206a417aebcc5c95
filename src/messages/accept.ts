import type { Queue } from "bullmq";
import { and, eq, sql } from "drizzle-orm";
import type { Database } from "../../db/client.js";
import { idempotencyKeys } from "../../db/schema.js";
import { decide, initialState, type MessageContent } from "../domain/message.js";
import { type NotificationType, TIME_TO_LIVE_MS, tierOf } from "../domain/priority.js";
import type { Logger } from "../logger.js";
import type { Organization } from "../organizations/store.js";
import { type DeliveryJobData, enqueueDelivery } from "./delivery-queue.js";
import { appendEvents } from "./event-store.js";

export const IDEMPOTENCY_WINDOW_MS = 24 * 60 * 60 * 1000;
/** The API fails fast on Redis: past this the job is left to the sweeper. */
const ENQUEUE_TIMEOUT_MS = 500;

export interface AcceptDeps {
  db: Database;
  queue: Queue<DeliveryJobData>;
  logger: Logger;
  now: () => Date;
  newId: () => string;
}

export interface AcceptRequest {
  organization: Organization;
  channel: MessageContent["channel"];
  recipient: string;
  sender: string;
  body: string;
  retryEnabled: boolean;
  notificationType: NotificationType | undefined;
  idempotency?: { key: string; requestHash: string };
}

export type AcceptResult =
  | { outcome: "accepted"; messageId: string }
  | { outcome: "replayed"; messageId: string }
  | { outcome: "idempotency_conflict" };

/**
 * Accepts a message: commits its `accepted` event (and the idempotency claim) in one transaction,
 * then adds its delivery job. The job is best effort: if Redis is down the message is still
 * accepted, and the sweeper enqueues it once Redis is back.
 */
export async function acceptMessage(deps: AcceptDeps, request: AcceptRequest): Promise<AcceptResult> {
  const now = deps.now();
  const messageId = deps.newId();
  const priority = tierOf(request.notificationType);
  const content: MessageContent = {
    id: messageId,
    organizationId: request.organization.id,
    productId: request.organization.productId,
    channel: request.channel,
    priority,
    notificationType: request.notificationType ?? null,
    retryEnabled: request.retryEnabled,
    recipient: request.recipient,
    sender: request.sender,
    body: request.body,
    expiresAt: new Date(now.getTime() + TIME_TO_LIVE_MS[priority]).toISOString(),
  };

  const result = await deps.db.transaction(async (tx): Promise<AcceptResult> => {
    const { idempotency } = request;
    if (idempotency) {
      const claimed = await tx
        .insert(idempotencyKeys)
        .values({
          organizationId: content.organizationId,
          key: idempotency.key,
          requestHash: idempotency.requestHash,
          messageId,
          createdAt: now,
        })
        .onConflictDoUpdate({
          target: [idempotencyKeys.organizationId, idempotencyKeys.key],
          set: { requestHash: idempotency.requestHash, messageId, createdAt: now },
          // An expired key may be reused; a live one is answered from what it recorded.
          setWhere: sql`${idempotencyKeys.createdAt} < ${new Date(now.getTime() - IDEMPOTENCY_WINDOW_MS).toISOString()}::timestamptz`,
        })
        .returning({ messageId: idempotencyKeys.messageId });
      if (claimed.length === 0) {
        const [existing] = await tx
          .select({ requestHash: idempotencyKeys.requestHash, messageId: idempotencyKeys.messageId })
          .from(idempotencyKeys)
          .where(
            and(
              eq(idempotencyKeys.organizationId, content.organizationId),
              eq(idempotencyKeys.key, idempotency.key),
            ),
          );
        if (!existing) throw new Error("idempotency key vanished while held");
        return existing.requestHash === idempotency.requestHash
          ? { outcome: "replayed", messageId: existing.messageId }
          : { outcome: "idempotency_conflict" };
      }
    }
    const decision = decide(initialState, { type: "accept", message: content, now });
    if (!("events" in decision)) throw new Error(`accept refused: ${JSON.stringify(decision)}`);
    await appendEvents(tx, initialState, decision.events);
    return { outcome: "accepted", messageId };
  });

  if (result.outcome === "accepted") {
    try {
      await withTimeout(enqueueDelivery(deps.queue, { messageId, priority }), ENQUEUE_TIMEOUT_MS);
    } catch (error) {
      deps.logger.warn({ err: error, messageId }, "could not enqueue delivery; the sweeper will retry");
    }
  }
  return result;
}

function withTimeout<T>(promise: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}
