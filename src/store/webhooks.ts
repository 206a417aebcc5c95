import { and, asc, count, desc, eq, gt, lt, sql } from "drizzle-orm";
import type { Executor } from "../../db/client.js";
import { webhookAttempts, webhookEndpoints } from "../../db/schema.js";

/** An organization's webhook endpoint as stored, its secrets sealed (docs/decisions/0035). */
export type StoredWebhookEndpoint = typeof webhookEndpoints.$inferSelect;
export type WebhookAttempt = typeof webhookAttempts.$inferSelect;

/** How many endpoints the organization has. */
export async function countWebhookEndpoints(db: Executor, organizationId: string): Promise<number> {
  const [row] = await db
    .select({ count: count() })
    .from(webhookEndpoints)
    .where(eq(webhookEndpoints.organizationId, organizationId));
  return row?.count ?? 0;
}

export async function insertWebhookEndpoint(
  db: Executor,
  endpoint: StoredWebhookEndpoint,
): Promise<StoredWebhookEndpoint> {
  const [row] = await db.insert(webhookEndpoints).values(endpoint).returning();
  return row as StoredWebhookEndpoint;
}

/** The organization's endpoints after `afterId` (ids are UUIDv7: oldest first), at most `limit`. */
export async function pageOfWebhookEndpoints(
  db: Executor,
  organizationId: string,
  limit: number,
  afterId?: string,
): Promise<StoredWebhookEndpoint[]> {
  return db
    .select()
    .from(webhookEndpoints)
    .where(
      and(
        eq(webhookEndpoints.organizationId, organizationId),
        afterId ? gt(webhookEndpoints.id, afterId) : undefined,
      ),
    )
    .orderBy(asc(webhookEndpoints.id))
    .limit(limit);
}

/** One of the organization's endpoints; another organization's is undefined, like an unknown one. */
export async function findWebhookEndpoint(
  db: Executor,
  organizationId: string,
  id: string,
): Promise<StoredWebhookEndpoint | undefined> {
  const [row] = await db
    .select()
    .from(webhookEndpoints)
    .where(and(eq(webhookEndpoints.organizationId, organizationId), eq(webhookEndpoints.id, id)))
    .limit(1);
  return row;
}

/** Changes one of the organization's endpoints; undefined when it has no such endpoint. */
export async function updateWebhookEndpoint(
  db: Executor,
  organizationId: string,
  id: string,
  changes: Partial<Omit<StoredWebhookEndpoint, "id" | "organizationId" | "createdAt">>,
): Promise<StoredWebhookEndpoint | undefined> {
  const [row] = await db
    .update(webhookEndpoints)
    .set(changes)
    .where(and(eq(webhookEndpoints.organizationId, organizationId), eq(webhookEndpoints.id, id)))
    .returning();
  return row;
}

/**
 * Gives one of the organization's endpoints a new sealed secret, the current one becoming its
 * previous one until `previousExpiresAt`, in one statement: two rotations at once each keep the
 * secret the other replaced, and none is lost. Undefined when the organization has no such endpoint.
 */
export async function rotateWebhookEndpointSecret(
  db: Executor,
  organizationId: string,
  id: string,
  change: { secretSealed: Buffer; previousSecretExpiresAt: Date; updatedAt: Date },
): Promise<StoredWebhookEndpoint | undefined> {
  const [row] = await db
    .update(webhookEndpoints)
    .set({ ...change, previousSecretSealed: sql`${webhookEndpoints.secretSealed}` })
    .where(and(eq(webhookEndpoints.organizationId, organizationId), eq(webhookEndpoints.id, id)))
    .returning();
  return row;
}

/** Deletes one of the organization's endpoints (its attempts go with it); false when it has none such. */
export async function deleteWebhookEndpoint(
  db: Executor,
  organizationId: string,
  id: string,
): Promise<boolean> {
  const deleted = await db
    .delete(webhookEndpoints)
    .where(and(eq(webhookEndpoints.organizationId, organizationId), eq(webhookEndpoints.id, id)))
    .returning({ id: webhookEndpoints.id });
  return deleted.length > 0;
}

export async function insertWebhookAttempt(db: Executor, attempt: WebhookAttempt): Promise<WebhookAttempt> {
  const [row] = await db.insert(webhookAttempts).values(attempt).returning();
  return row as WebhookAttempt;
}

/** An endpoint's attempts before `beforeId`, newest first, at most `limit`. */
export async function pageOfWebhookAttempts(
  db: Executor,
  organizationId: string,
  endpointId: string,
  limit: number,
  beforeId?: string,
): Promise<WebhookAttempt[]> {
  return db
    .select()
    .from(webhookAttempts)
    .where(
      and(
        eq(webhookAttempts.organizationId, organizationId),
        eq(webhookAttempts.endpointId, endpointId),
        beforeId ? lt(webhookAttempts.id, beforeId) : undefined,
      ),
    )
    .orderBy(desc(webhookAttempts.id))
    .limit(limit);
}
