import { and, asc, count, desc, eq, gt, lt, type SQL, sql } from "drizzle-orm";
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
 * Drops the deliveries waiting for an endpoint: what disabling it does, in the disable's own
 * transaction (docs/decisions/0036). Their last attempt's row says what happened to them; the
 * organization recovers what it missed with `POST …/recover`.
 */
export async function dropWaitingDeliveries(db: Executor, endpointId: string): Promise<void> {
  await db.execute(sql`delete from webhook_deliveries where endpoint_id = ${endpointId}::uuid`);
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

/**
 * Deletes one of the organization's endpoints, its row only: its waiting deliveries are never sent
 * (the claim and the listings go through the endpoint) and the worker's purge deletes them and its
 * attempts later, a chunk at a time (workers/webhook-purger.ts), so that no cascade holds locks
 * every event write may wait on. False when the organization has no such endpoint.
 */
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

/** What `recoverWebhookDeliveries` is asked to re-send. */
export interface RecoveryRequest {
  organizationId: string;
  endpointId: string;
  /** Events that occurred at or after this instant. */
  since: Date;
  /** Only messages accepted at or after this are looked at (their events are found through them). */
  messagesCreatedSince: Date;
  /** Events queued at most. */
  limit: number;
}

export interface Recovery {
  /** Events found and due to be sent, in order (those already pending included). */
  recovered: number;
  /** Of them, those not pending already: the new deliveries. */
  queued: number;
  /** When more were found than `limit`: the `occurred_at` of the first left out. */
  nextSince: Date | null;
}

/**
 * Margin on a message's `updated_at` or `delivery_updated_at` (its last event's `occurred_at`) against `since`: the events
 * of one message come from different processes, whose clocks may differ by this much.
 */
const CLOCK_SKEW = "1 minute";

/**
 * For {@link recoveryStatement}, in its transaction: `messages` and `message_events` are joined
 * partition by partition (their day partitions have the same bounds, docs/decisions/0042), so
 * Postgres weighs each day's few messages against that day's events' key. Joined whole, it
 * counts a probe of every partition per message and scans the events of the days instead. Off
 * by default in Postgres (it costs planning time), so set for this statement only.
 */
export const PARTITIONWISE_JOIN = sql`select set_config('enable_partitionwise_join', 'on', true)`;

/**
 * The lowest message id of the UTC day of `at` minus a minute (migration 0018's
 * `message_partition_bound`, folded while planning): a bound that selects whole day partitions.
 */
const ID_FLOOR = (at: Date) =>
  sql`message_partition_bound(((${at.toISOString()}::timestamptz - interval '1 minute') at time zone 'UTC')::date)`;

/**
 * The statement of {@link recoverWebhookDeliveries}, exported so a test can ask Postgres for its plan
 * (after {@link PARTITIONWISE_JOIN}, in one transaction).
 *
 * The events are found through the organization's messages accepted since
 * `messagesCreatedSince` (the `messages_organization_created_idx` index) and last changed since
 * `since`, then each message's events through `message_events (message_id, seq)`: never a scan
 * of `message_events`, which has no index by organization or time. The endpoint's own row, in the
 * same statement, gives its subscription and keeps the work to the organization's own endpoint.
 * `LIMIT limit + 1` tells whether there were more, and where they start.
 */
export function recoveryStatement(request: RecoveryRequest): SQL {
  const since = request.since.toISOString();
  return sql`
    with found as (
      select e.message_id, e.seq, t.event_type, e.occurred_at
      from webhook_endpoints w
      join messages m on m.organization_id = w.organization_id
      join message_events e on e.message_id = m.message_id
      cross join lateral (select webhook_event_type(e.type, e.data) as event_type) t
      where w.id = ${request.endpointId}::uuid
        and w.organization_id = ${request.organizationId}::uuid
        and m.created_at >= ${request.messagesCreatedSince.toISOString()}::timestamptz
        -- The same bound on the ids (UUIDv7s: their time is the accept's, as created_at is), to
        -- the start of its day, on both tables: Postgres then reads only the day partitions from
        -- there on (docs/decisions/0042). Without it, it costs a probe of every partition's key per
        -- message and prefers to scan them all.
        and m.message_id >= ${ID_FLOOR(request.messagesCreatedSince)}
        and e.message_id >= ${ID_FLOOR(request.messagesCreatedSince)}
        -- A receipt moves delivery_updated_at, not updated_at (docs/decisions/0038).
        and greatest(m.updated_at, m.delivery_updated_at) >= ${since}::timestamptz - interval '${sql.raw(CLOCK_SKEW)}'
        and e.occurred_at >= ${since}::timestamptz
        and t.event_type is not null
        and (w.event_types is null or t.event_type = any (w.event_types))
      order by e.occurred_at, e.message_id, e.seq
      limit ${request.limit + 1}::int
    ),
    chosen as (
      select * from found order by occurred_at, message_id, seq limit ${request.limit}::int
    ),
    queued as (
      insert into webhook_deliveries (endpoint_id, organization_id, message_id, seq, event_type, event_at)
      select ${request.endpointId}::uuid, ${request.organizationId}::uuid, message_id, seq, event_type, occurred_at
      from chosen
      order by occurred_at, message_id, seq
      -- One pending already is not doubled; one waiting on a retry is brought forward. One leased
      -- to a worker is left alone (its lease, not its due time, keeps it from a second claim).
      on conflict on constraint webhook_deliveries_event_unique do update
        set next_attempt_at = least(webhook_deliveries.next_attempt_at, now())
        where webhook_deliveries.attempts > 0
          and (webhook_deliveries.leased_until is null or webhook_deliveries.leased_until <= now())
      returning webhook_deliveries.xmax = 0 as inserted
    )
    select
      (select count(*) from chosen)::int as recovered,
      (select count(*) from queued where inserted)::int as queued,
      (select occurred_at from found order by occurred_at, message_id, seq offset ${request.limit}::int limit 1)
        as next_since`;
}

/**
 * Queues again every event of the organization's messages since `request.since` that the
 * endpoint subscribes to, in event order (`occurred_at`, message, `seq`), as deliveries due now,
 * at most `request.limit`: one already pending is not doubled, and is made due now if it waits on
 * a retry (not while a worker holds it). Nothing is queued when the organization has no such
 * endpoint.
 */
export async function recoverWebhookDeliveries(db: Executor, request: RecoveryRequest): Promise<Recovery> {
  const [row] = await db.transaction(async (tx) => {
    await tx.execute(PARTITIONWISE_JOIN);
    return tx.execute<{ recovered: number; queued: number; next_since: string | Date | null }>(
      recoveryStatement(request),
    );
  });
  return {
    recovered: row?.recovered ?? 0,
    queued: row?.queued ?? 0,
    nextSince: row?.next_since ? new Date(row.next_since) : null,
  };
}
