import type { SqlClient } from "../../db/client.js";
import { isUndefinedTable } from "../../db/errors.js";
import type { Channel, MessageEvent } from "../domain/events.js";
import type { PriorityTier } from "../domain/priority.js";
import { FINAL_WEBHOOK_EVENT_TYPES, type MessageFacts } from "../domain/webhooks.js";
import { type DayTables, dayTable, onDayTables, oneDayOf } from "./day-partitions.js";
import { runStatement, runStatementPlannedEachTime } from "./statement.js";

/**
 * The webhook deliveries still to be made (`webhook_deliveries`, written by the fan-out trigger in
 * each event's transaction): how a dispatcher claims the due ones, fairly across endpoints and in
 * each message's order, and settles what came of its attempts, many in one statement
 * (docs/decisions/0036).
 */

/** ISO 8601 in UTC, as events carry their instants (the shared client reads dates as text). */
const iso = (column: string) => `to_char(${column} at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`;

/** A delivery a dispatcher claimed: what its POST needs (the event, its message, the endpoint). */
export interface ClaimedDelivery {
  id: number;
  endpointId: string;
  organizationId: string;
  messageId: string;
  seq: number;
  eventType: string;
  /** Attempts made before this one. */
  attempts: number;
  /** The claim's lease (`leased_until` as Postgres writes it): its settle's fencing token. */
  leasedUntil: string;
  /** The event's `occurred_at` (ISO 8601): the lag to the endpoint's 2xx is measured from it. */
  eventAt: string;
  /** The stored event; an `accepted` event's data is left out (it holds the content, which no body carries). */
  event: MessageEvent & { seq: number };
  message: { channel: Channel; priority: PriorityTier; notificationType: string | null };
  endpoint: ClaimedEndpoint;
}

/** The endpoint of a claimed delivery: where to POST and its sealed secrets. */
export interface ClaimedEndpoint {
  id: string;
  organizationId: string;
  url: string;
  secretSealed: Buffer;
  previousSecretSealed: Buffer | null;
  previousSecretExpiresAt: Date | null;
  /** Changes whenever the secrets do (rotation): a cache of the opened secrets is keyed by it. */
  updatedAt: string;
}

export interface ClaimOptions {
  /** The most deliveries to claim in all (the process's free slots). */
  limit: number;
  /** The most attempts one endpoint may have in flight in this process. */
  perEndpoint: number;
  /** Attempts this process has in flight, by endpoint id: an endpoint gets only its free slots. */
  inFlight: ReadonlyMap<string, number>;
  /** How long a claimed delivery is leased: another process may take it after that (the attempt's time-out and then some). */
  leaseMs: number;
  /**
   * Where the last claim stopped (`Claim.cursor`): endpoints are visited in id order from the one
   * after it, round the circle, so that every endpoint with due deliveries gets its turn.
   */
  after?: string | null;
  /**
   * The process's knowledge of which day partitions are ready: with it, the details of deliveries
   * whose messages are all of one day are read from that day's tables by name. Without it, from
   * the parent tables.
   */
  dayTables?: DayTables;
}

/** What a claim took, and the endpoint the next claim starts after. */
export interface Claim {
  deliveries: ClaimedDelivery[];
  /** The last endpoint this claim took from (the last claim's cursor when it took nothing; null before any), for `ClaimOptions.after`. */
  cursor: string | null;
}

/**
 * The endpoints with deliveries are visited round the circle of their ids, from the one after the
 * cursor, by a loose index scan of `webhook_deliveries_due_idx` (one index probe per endpoint
 * visited). The scan is lazy: it stops as soon as the claim has its `limit`, so a claim's cost
 * follows what it takes, not how many endpoints have deliveries (docs/decisions/0036). An
 * endpoint at this process's cap, disabled, or without a row its messages' order lets go is passed
 * over; each other one gives up to its free slots, oldest first.
 *
 * Planned at each call (src/store/statement.ts): the table is a queue, empty between bursts (a
 * vacuum may leave it no page at all), and the plan Postgres kept from such a moment read the
 * whole table for every endpoint visited and every row looked at: 10,051 sequential scans in one
 * claim over 20,000 rows (test/integration/store/webhook-claim-plans.test.ts). What the POSTs need
 * besides, from the partitioned tables whose planning costs more than the rest together, is read
 * by a second statement, prepared ({@link CLAIMED_DETAILS}).
 */
const CLAIM = `
with recursive after_cursor as (
  (select d.endpoint_id from webhook_deliveries d where d.endpoint_id > $5::uuid
    order by d.endpoint_id limit 1)
  union all
  select n.endpoint_id from after_cursor f
  cross join lateral (
    select d.endpoint_id from webhook_deliveries d where d.endpoint_id > f.endpoint_id
    order by d.endpoint_id limit 1) n
),
up_to_cursor as (
  (select d.endpoint_id from webhook_deliveries d where d.endpoint_id <= $5::uuid
    order by d.endpoint_id limit 1)
  union all
  select n.endpoint_id from up_to_cursor f
  cross join lateral (
    select d.endpoint_id from webhook_deliveries d
    where d.endpoint_id > f.endpoint_id and d.endpoint_id <= $5::uuid
    order by d.endpoint_id limit 1) n
),
visits as (
  select v.endpoint_id, $2::integer - coalesce(($3::jsonb ->> v.endpoint_id::text)::integer, 0) as slots
  from (select endpoint_id from after_cursor union all select endpoint_id from up_to_cursor) v
),
-- The endpoints are taken in their visiting order: nothing but the lateral subquery is joined to
-- the visits (the enabled check is inside it), so the plan is a nested loop over them in that
-- order whatever Postgres estimates (docs/decisions/0036, "Found later").
claimed as (
  select c.id from visits v
  cross join lateral (
    select d.id from webhook_deliveries d
    where d.endpoint_id = v.endpoint_id and d.next_attempt_at <= now()
      and (d.leased_until is null or d.leased_until <= now())
      and exists (select 1 from webhook_endpoints w where w.id = v.endpoint_id and w.enabled)
      -- One message's events go out in seq order: not while an earlier one is untried or in flight.
      and not exists (
        select 1 from webhook_deliveries p
        where p.endpoint_id = d.endpoint_id and p.message_id = d.message_id and p.seq < d.seq
          and p.attempts = 0)
    order by d.next_attempt_at, d.id
    limit greatest(v.slots, 0)
    for update skip locked) c
  where v.slots > 0
  limit $1::integer
),
leased as (
  -- Only an unindexed column: a HOT update, no index entry written. The rows are found by their
  -- ids through an array, as the settle's are: joined to the claimed rows instead, Postgres may
  -- read the whole table (mostly dead rows between two vacuums) to hash it.
  update webhook_deliveries d set leased_until = now() + $4::integer * interval '1 millisecond'
  where d.id = any(array(select id from claimed))
  returning d.id, d.endpoint_id, d.organization_id, d.message_id, d.seq, d.event_type, d.event_at, d.attempts,
    d.leased_until
)
select l.id, l.endpoint_id, l.organization_id, l.message_id, l.seq, l.event_type, l.attempts,
  l.leased_until::text as leased_until, ${iso("l.event_at")} as event_at
from leased l
order by l.id`;

/**
 * For the deliveries a claim leased (`$1` their messages, `$2` their events' seq, `$3` their
 * endpoints, in the claim's order): the message, the event and the endpoint each POST needs, by
 * their keys (the message id finds the partition at run time, or {@link readDetails} names it).
 */
export const CLAIMED_DETAILS = `
select c.ord::integer as ord, m.channel, m.priority, m.notification_type,
  ev.type, ev.retry_count, case when ev.type = 'accepted' then '{}' else ev.data::text end as data,
  ${iso("ev.occurred_at")} as occurred_at,
  w.url, w.secret_sealed, w.previous_secret_sealed, ${iso("w.previous_secret_expires_at")} as previous_secret_expires_at,
  w.updated_at::text as endpoint_updated_at
from unnest($1::uuid[], $2::integer[], $3::uuid[]) with ordinality as c(message_id, seq, endpoint_id, ord)
join webhook_endpoints w on w.id = c.endpoint_id
join messages m on m.message_id = c.message_id
join message_events ev on ev.message_id = c.message_id and ev.seq = c.seq`;

/**
 * Gives back leases a claim took (`$1` the deliveries' ids, `$2` their leases as the claim read
 * them, both as text), those the rows still hold: a lease another worker took since is a later
 * one and stays. Planned at each call, as the claim is (a table used as a queue).
 */
const RELEASE = `
update webhook_deliveries d set leased_until = null
from unnest($1::text[], $2::text[]) as l(id, leased_until)
where d.id = l.id::bigint and d.leased_until = l.leased_until::timestamptz`;

/**
 * Gives back leases a claim took ({@link RELEASE}): where the details could not be read, or where
 * the dispatcher will not start what it claimed (its handoffs took the slots meanwhile).
 */
export async function releaseLeases(
  sql: SqlClient,
  leases: ReadonlyArray<{ id: number | string; leasedUntil: string }>,
): Promise<void> {
  if (leases.length === 0) return;
  await runStatementPlannedEachTime(sql, RELEASE, [
    leases.map((lease) => String(lease.id)),
    leases.map((lease) => lease.leasedUntil),
  ]);
}

interface LeaseRow {
  id: string | number;
  leased_until: string;
  endpoint_id: string;
  organization_id: string;
  message_id: string;
  seq: number;
  event_type: string;
  attempts: number;
  event_at: string;
}

interface DetailsRow {
  ord: number;
  channel: Channel;
  priority: PriorityTier;
  notification_type: string | null;
  type: MessageEvent["type"];
  retry_count: number;
  data: string;
  occurred_at: string;
  url: string;
  secret_sealed: Buffer;
  previous_secret_sealed: Buffer | null;
  previous_secret_expires_at: string | null;
  endpoint_updated_at: string;
}

/**
 * Claims due deliveries, in one statement (and reads what their POSTs need in a second): visiting
 * the endpoints with deliveries round the circle from `after`, for each enabled one up to its free
 * slots (`perEndpoint` less what this process has in flight to it), oldest first, skipping rows
 * another process holds (`FOR UPDATE SKIP LOCKED`), at most `limit` in all; and leases them (`leased_until = now() + leaseMs`), so that if this
 * process dies mid-attempt another retries them once the lease is over (at least once). A delivery
 * waits while an earlier event of its message to the same endpoint is untried or in flight
 * (`attempts = 0`); once that one has failed, the later ones are not held back (receivers drop
 * stale events by `seq`). A disabled endpoint's deliveries are not claimed (disabling it drops
 * them; the purge drops any written meanwhile). If the second statement fails, the leases are
 * given back (where Postgres still answers) before the error is thrown.
 */
export async function claimDueDeliveries(sql: SqlClient, options: ClaimOptions): Promise<Claim> {
  const after = options.after ?? null;
  if (options.limit <= 0) return { deliveries: [], cursor: after };
  const inFlight = JSON.stringify(Object.fromEntries(options.inFlight));
  const leases = await runStatementPlannedEachTime<LeaseRow[]>(sql, CLAIM, [
    options.limit,
    options.perEndpoint,
    inFlight,
    Math.round(options.leaseMs),
    // The smallest id: the first lap is then the whole circle.
    after ?? "00000000-0000-0000-0000-000000000000",
  ]);
  if (leases.length === 0) return { deliveries: [], cursor: after };
  let details: DetailsRow[];
  try {
    details = await readDetails(sql, leases, options.dayTables);
  } catch (error) {
    // The leases have committed: given back, where Postgres still answers, the deliveries go at
    // the next claim instead of when their leases run out. (Waited for: bounded by the client's
    // connect and statement time-outs.)
    await releaseLeases(
      sql,
      leases.map((lease) => ({ id: lease.id, leasedUntil: lease.leased_until })),
    ).catch(() => {});
    throw error;
  }
  const byOrdinal = new Map(details.map((row) => [row.ord, row]));
  // A delivery whose message, event or endpoint is gone meanwhile is left leased, as the one
  // statement's join left it before: its lease runs out (an endpoint's deletion purges it).
  const deliveries = leases.flatMap((lease, i) => {
    const row = byOrdinal.get(i + 1);
    return row ? [toClaimedDelivery(lease, row)] : [];
  });
  return { deliveries, cursor: lastVisited(deliveries, after) ?? after };
}

/**
 * {@link CLAIMED_DETAILS} for `leases`, on their messages' day partitions by name when they are all
 * of one day whose tables are ready (src/store/day-partitions.ts), else on the parent tables. On
 * the parent, the plan Postgres keeps holds every partition of both tables, pruned at each probe
 * as it runs: with the ~100 days of each a 90-day retention keeps, the read cost 2–4 ms a claim of
 * 40 against 0.8–1.0 ms on the day's tables (docs/decisions/0036, "Found later").
 */
async function readDetails(
  sql: SqlClient,
  leases: readonly LeaseRow[],
  dayTables?: DayTables,
): Promise<DetailsRow[]> {
  const messageIds = leases.map((lease) => lease.message_id);
  const values = [messageIds, leases.map((lease) => lease.seq), leases.map((lease) => lease.endpoint_id)];
  const day = dayTables && oneDayOf(messageIds);
  const tables = day === undefined ? undefined : [dayTable("messages", day), dayTable("message_events", day)];
  if (tables && (await dayTables?.ready(tables))) {
    try {
      return await runStatement<DetailsRow[]>(sql, onDayTables(CLAIMED_DETAILS, day as string), values);
    } catch (error) {
      // Dropped since (retention): asked about again at the next claim.
      if (!isUndefinedTable(error)) throw error;
      dayTables?.forget(tables);
    }
  }
  return runStatement<DetailsRow[]>(sql, CLAIMED_DETAILS, values);
}

/**
 * The last endpoint a claim took from, in its visiting order: the greatest id after the cursor,
 * or, where the claim went round past the end, the greatest id up to it. (A uuid's order in
 * Postgres is its bytes', which is its lower-case text's.)
 */
function lastVisited(deliveries: readonly ClaimedDelivery[], after: string | null): string | null {
  let lastAfter: string | null = null;
  let lastWrapped: string | null = null;
  for (const { endpointId } of deliveries) {
    if (after === null || endpointId > after) {
      if (lastAfter === null || endpointId > lastAfter) lastAfter = endpointId;
    } else if (lastWrapped === null || endpointId > lastWrapped) {
      lastWrapped = endpointId;
    }
  }
  return lastWrapped ?? lastAfter;
}

function toClaimedDelivery(lease: LeaseRow, row: DetailsRow): ClaimedDelivery {
  return {
    id: Number(lease.id),
    endpointId: lease.endpoint_id,
    organizationId: lease.organization_id,
    messageId: lease.message_id,
    seq: lease.seq,
    eventType: lease.event_type,
    attempts: lease.attempts,
    leasedUntil: lease.leased_until,
    eventAt: lease.event_at,
    event: {
      type: row.type,
      retryCount: row.retry_count,
      occurredAt: row.occurred_at,
      data: JSON.parse(row.data),
      seq: lease.seq,
    } as MessageEvent & { seq: number },
    message: { channel: row.channel, priority: row.priority, notificationType: row.notification_type },
    endpoint: toClaimedEndpoint(lease.endpoint_id, lease.organization_id, row),
  };
}

/** An endpoint's columns as a claim's details or an append that hands off select them. */
type EndpointColumns = Pick<
  DetailsRow,
  "url" | "secret_sealed" | "previous_secret_sealed" | "previous_secret_expires_at" | "endpoint_updated_at"
>;

function toClaimedEndpoint(id: string, organizationId: string, row: EndpointColumns): ClaimedEndpoint {
  return {
    id,
    organizationId,
    url: row.url,
    secretSealed: row.secret_sealed,
    previousSecretSealed: row.previous_secret_sealed,
    previousSecretExpiresAt: row.previous_secret_expires_at ? new Date(row.previous_secret_expires_at) : null,
    updatedAt: row.endpoint_updated_at,
  };
}

/**
 * An event the delivery worker appended, handed to its own dispatcher once the append has
 * committed (docs/decisions/0036, "The handoff"): what the POST's body needs, from memory.
 */
export interface HandedEvent {
  message: MessageFacts;
  event: MessageEvent & { seq: number };
}

/** The final events' types, as an SQL array (an endpoint of these only may have its deliveries handed off). */
const FINAL_TYPES = `array[${FINAL_WEBHOOK_EVENT_TYPES.map((type) => `'${type}'`).join(", ")}]::text[]`;

/**
 * The part of an append that hands off (`APPEND_HANDING_OFF`, src/store/events.ts) that writes its
 * events' webhook deliveries, as the fan-out trigger would (db/migrations/0023, 0025: the same
 * rows, in the same order), but those of the endpoints of final events only born leased to the
 * appending process (docs/decisions/0036, "The handoff"): `leaseMs` (a parameter, in ms) after
 * their `next_attempt_at`, both `now()` (a claim never leaves that pair: it leases only rows due
 * before it began, which is after their writer's). `appended` is the relation of the events the
 * statement inserts (`organization_id, message_id, seq, type, data, occurred_at, position`). The
 * statement must set `notify.webhook_fan_out_written` (the trigger then writes nothing of its own).
 * Returns what {@link selectHandedDeliveries} reads.
 */
export function insertDeliveriesHandingOff(appended: string, leaseMs: string): string {
  return `insert into webhook_deliveries (endpoint_id, organization_id, message_id, seq, event_type, event_at,
    leased_until)
  select w.id, a.organization_id, a.message_id, a.seq, t.event_type, a.occurred_at,
    case when w.event_types <@ ${FINAL_TYPES} then now() + ${leaseMs}::integer * interval '1 millisecond' end
  from ${appended} a
  cross join lateral (select webhook_event_type(a.type, a.data) as event_type) t
  join webhook_endpoints w on w.organization_id = a.organization_id and w.enabled
    and (w.event_types is null or t.event_type = any (w.event_types))
  where t.event_type is not null
  order by a.position
  returning id, endpoint_id, message_id, seq, event_type, leased_until`;
}

/**
 * The deliveries `written` ({@link insertDeliveriesHandingOff}) born leased, with their lease left
 * (ms, at the statement's end) and what the POST needs of their endpoints: each endpoint found by
 * its primary key (a lateral subquery keeps it a probe per row, never a read of the whole table to
 * hash it, whatever plan the prepared statement keeps).
 */
export function selectHandedDeliveries(written: string): string {
  return `select h.id, h.endpoint_id, h.message_id, h.seq, h.event_type, h.leased_until::text as leased_until,
    (extract(epoch from h.leased_until - clock_timestamp()) * 1000)::float8 as lease_left_ms,
    w.url, w.secret_sealed, w.previous_secret_sealed, w.previous_secret_expires_at, w.endpoint_updated_at
  from ${written} h
  cross join lateral (
    select w.url, w.secret_sealed, w.previous_secret_sealed,
      ${iso("w.previous_secret_expires_at")} as previous_secret_expires_at, w.updated_at::text as endpoint_updated_at
    from webhook_endpoints w where w.id = h.endpoint_id limit 1) w
  where h.leased_until is not null`;
}

/** A row of {@link selectHandedDeliveries}. */
export interface HandedRow extends EndpointColumns {
  id: string | number;
  endpoint_id: string;
  message_id: string;
  seq: number;
  event_type: string;
  leased_until: string;
  lease_left_ms: number;
}

/** A delivery an append handed off, ready to POST. */
export interface HandedDelivery extends ClaimedDelivery {
  /** When its born lease runs out, on `performance.now()`'s clock (this process's). */
  leaseEndsAt: number;
}

/**
 * A delivery an append handed off: its row, and its event and message from memory. Called as
 * soon as the statement has returned (its lease left is counted from then).
 */
export function handedDelivery(row: HandedRow, handed: HandedEvent): HandedDelivery {
  const { message, event } = handed;
  return {
    leaseEndsAt: performance.now() + row.lease_left_ms,
    id: Number(row.id),
    endpointId: row.endpoint_id,
    organizationId: message.organizationId,
    messageId: message.messageId,
    seq: event.seq,
    eventType: row.event_type,
    attempts: 0,
    leasedUntil: row.leased_until,
    eventAt: event.occurredAt,
    event,
    message: {
      channel: message.channel,
      priority: message.priority,
      notificationType: message.notificationType,
    },
    endpoint: toClaimedEndpoint(row.endpoint_id, message.organizationId, row),
  };
}

/**
 * Gives back handed deliveries this process will not POST now (`$1` their ids, `$2` their born
 * lease in ms): unleased, so due for any claim (they were born due). Only the lease changes, an
 * unindexed column: a HOT update, nothing written to the due index, however many an endpoint at
 * its cap gives back. Only rows still born leased (untouched since the read) change.
 */
const GIVE_BACK = `
update webhook_deliveries d set leased_until = null
where d.id = any($1::bigint[]) and d.attempts = 0
  and d.leased_until = d.next_attempt_at + $2::integer * interval '1 millisecond'`;

export async function giveBackDeliveries(
  sql: SqlClient,
  ids: readonly number[],
  bornLeaseMs: number,
): Promise<void> {
  if (ids.length === 0) return;
  await runStatementPlannedEachTime(sql, GIVE_BACK, [ids.map(String), Math.round(bornLeaseMs)]);
}

/** What came of one attempt of a claimed delivery, and what follows it. */
export interface DeliverySettlement {
  deliveryId: number;
  endpointId: string;
  organizationId: string;
  /** The attempt's row: its id (UUIDv7), the `webhook-id` and the event type. */
  attemptId: string;
  /** The delivery's attempts when it was claimed (`ClaimedDelivery.attempts`): a replayed settle changes nothing twice. */
  attemptsBefore: number;
  /**
   * The claim's lease (`ClaimedDelivery.leasedUntil`): a retry is settled only while the row still
   * holds that lease, so a settle that comes after the lease ran out and another worker claimed
   * the row does not clear that worker's lease (which would let a third claim it while in flight).
   */
  leasedUntil: string;
  eventId: string;
  eventType: string;
  attemptedAt: Date;
  durationMs: number;
  statusCode: number | null;
  errorClass: string | null;
  errorCode: string | null;
  /**
   * `delivered` and `given_up` remove the delivery; `retry` keeps it, one attempt more, due at
   * `retryAt`; `gone` (a 410) gives it up and disables its endpoint.
   */
  result: "delivered" | "retry" | "given_up" | "gone";
  retryAt?: Date;
}

export interface SettleOptions {
  /** The instant the endpoints' failing time is measured to. */
  now: Date;
  /** An endpoint failing for this long without a success is disabled (`disabled_reason = 'failing'`). */
  failingDisableMs: number;
}

/** An endpoint the settlement disabled. */
export interface DisabledEndpoint {
  endpointId: string;
  reason: "gone" | "failing";
}

/**
 * Per endpoint of a batch: whether any attempt succeeded, the first failure after its last
 * success (or its first failure, without one), and whether it answered 410.
 */
function endpointSummaries(settlements: readonly DeliverySettlement[]) {
  const byEndpoint = new Map<string, DeliverySettlement[]>();
  for (const s of settlements) {
    const list = byEndpoint.get(s.endpointId);
    if (list) list.push(s);
    else byEndpoint.set(s.endpointId, [s]);
  }
  // In endpoint order: two workers settling at once then tend to lock endpoint rows in the same
  // order (the plan follows this list); a deadlock all the same fails one settle, which is retried.
  return [...byEndpoint]
    .sort(([a], [b]) => (a < b ? -1 : 1))
    .map(([endpointId, list]) => {
      const successes = list.filter((s) => s.result === "delivered").map((s) => s.attemptedAt.getTime());
      const lastSuccess = successes.length > 0 ? Math.max(...successes) : undefined;
      const failuresAfter = list
        .filter(
          (s) =>
            s.result !== "delivered" && (lastSuccess === undefined || s.attemptedAt.getTime() > lastSuccess),
        )
        .map((s) => s.attemptedAt.getTime());
      return {
        endpoint_id: endpointId,
        succeeded: lastSuccess !== undefined,
        failing_from: failuresAfter.length > 0 ? new Date(Math.min(...failuresAfter)).toISOString() : null,
        gone: list.some((s) => s.result === "gone"),
      };
    });
}

/**
 * Records a batch of attempts and what follows them, in one statement: a delivered or given-up
 * delivery leaves `webhook_deliveries`, a retried one gets one attempt more and its next time;
 * every attempt gets its row in `webhook_attempts` (`next_retry_at`, `gave_up`); an endpoint's
 * `failing_since` is cleared by a success and set by a failure after it; a 410 disables the endpoint
 * (`gone`), and so does failing since `failingDisableMs` ago (`failing`), dropping its waiting
 * deliveries (re-enabling it does not resume them: the organization recovers what it missed). An
 * endpoint is only written when one of these changes it, so a healthy endpoint's successes do not
 * touch its row. Attempts of an endpoint deleted meanwhile are dropped with it.
 *
 * Settling a batch twice (its reply lost, the statement retried) changes nothing more: an attempt's
 * row is written once (its id), and a retry counts once (`attempts` must still be what the claim
 * read). Returns the endpoints disabled.
 */
const SETTLE = `
with o as (
  select * from json_to_recordset($1::json) as o(delivery_id bigint, attempt_id uuid, endpoint_id uuid,
    organization_id uuid, event_id text, event_type text, attempted_at timestamptz, duration_ms integer,
    status_code smallint, error_class text, error_code text, retry_at timestamptz, gave_up boolean,
    attempts_before integer, leased_until timestamptz)
),
changes as (
  select s.endpoint_id, f.failing_since, w.enabled as was_enabled,
    case when s.gone then 'gone'
         when f.failing_since <= $3::timestamptz - $4::bigint * interval '1 millisecond' then 'failing'
    end as disable
  from json_to_recordset($2::json) as s(endpoint_id uuid, succeeded boolean, failing_from timestamptz, gone boolean)
  join webhook_endpoints w on w.id = s.endpoint_id
  cross join lateral (
    select case when s.succeeded then s.failing_from else coalesce(w.failing_since, s.failing_from) end
      as failing_since) f
),
-- The endpoints this batch disables: all their deliveries go (none is rescheduled or removed
-- apart, as a statement must not change one row twice).
disabling as (
  select c.endpoint_id from changes c where c.was_enabled and c.disable is not null
),
-- The rows each part changes are found by their ids, through an array: joined to the input
-- instead, Postgres could read the whole table for them (a hash join), and did at every settle for
-- the retries and the disabled endpoints even when there were none; a table whose deliveries come
-- and go is mostly dead rows to read through (test/integration/store/webhook-settle-plans.test.ts).
-- A disabled endpoint's deliveries are looked for only when the batch disables one (rare: then
-- the table may be read whole).
removed as (
  delete from webhook_deliveries d where d.id = any(array(select delivery_id from o where retry_at is null))
    and d.endpoint_id not in (select endpoint_id from disabling)
),
rescheduled as (
  update webhook_deliveries d set attempts = d.attempts + 1, next_attempt_at = o.retry_at, leased_until = null
  from o where d.id = any(array(select delivery_id from o where retry_at is not null))
    and d.id = o.delivery_id and o.retry_at is not null and d.attempts = o.attempts_before
    and d.leased_until = o.leased_until
    and d.endpoint_id not in (select endpoint_id from disabling)
),
dropped as (
  delete from webhook_deliveries d
  where exists (select from disabling) and d.endpoint_id in (select endpoint_id from disabling)
),
recorded as (
  insert into webhook_attempts (id, endpoint_id, organization_id, event_id, event_type, attempted_at,
    status_code, duration_ms, error_class, error_code, next_retry_at, gave_up)
  select o.attempt_id, o.endpoint_id, o.organization_id, o.event_id, o.event_type, o.attempted_at,
    o.status_code, o.duration_ms, o.error_class, o.error_code, o.retry_at, o.gave_up
  from o where exists (select 1 from webhook_endpoints w where w.id = o.endpoint_id)
  on conflict (id) do nothing
)
update webhook_endpoints w set
  failing_since = c.failing_since,
  enabled = w.enabled and c.disable is null,
  disabled_reason = case when w.enabled and c.disable is not null then c.disable else w.disabled_reason end,
  updated_at = case when w.enabled and c.disable is not null then $3::timestamptz else w.updated_at end
from changes c
where w.id = c.endpoint_id
  and (w.failing_since is distinct from c.failing_since or (w.enabled and c.disable is not null))
returning w.id as endpoint_id, case when c.was_enabled then c.disable end as disabled`;

export async function settleDeliveries(
  sql: SqlClient,
  settlements: readonly DeliverySettlement[],
  options: SettleOptions,
): Promise<DisabledEndpoint[]> {
  if (settlements.length === 0) return [];
  // One outcome per delivery: the last (a statement must not change one row twice).
  const unique = [...new Map(settlements.map((s) => [s.deliveryId, s])).values()];
  const attempts = unique.map((s) => ({
    delivery_id: s.deliveryId,
    attempt_id: s.attemptId,
    endpoint_id: s.endpointId,
    organization_id: s.organizationId,
    event_id: s.eventId,
    event_type: s.eventType,
    attempted_at: s.attemptedAt.toISOString(),
    duration_ms: s.durationMs,
    status_code: s.statusCode,
    error_class: s.errorClass,
    error_code: s.errorCode,
    retry_at: s.result === "retry" && s.retryAt ? s.retryAt.toISOString() : null,
    gave_up: s.result === "given_up" || s.result === "gone",
    attempts_before: s.attemptsBefore,
    leased_until: s.leasedUntil,
  }));
  // Planned at each call (src/store/statement.ts), as the claim is: a plan kept from settles of a
  // quiet spell, made with the table empty, reads the table whole once a burst has filled it
  // (test/integration/store/webhook-settle-plans.test.ts). A worker's dispatcher settles its
  // batches at most once every MIN_SETTLE_GAP_MS (20 ms), so this costs it at most 50 plannings a
  // second, whatever the load (more only while a failing batch is settled an outcome at a time, and
  // at shutdown).
  const rows = await runStatementPlannedEachTime<
    Array<{ endpoint_id: string; disabled: "gone" | "failing" | null }>
  >(sql, SETTLE, [
    JSON.stringify(attempts),
    JSON.stringify(endpointSummaries(unique)),
    options.now.toISOString(),
    options.failingDisableMs,
  ]);
  return rows.flatMap((row) => (row.disabled ? [{ endpointId: row.endpoint_id, reason: row.disabled }] : []));
}
