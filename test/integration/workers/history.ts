import { asc, eq } from "drizzle-orm";
import { expect } from "vitest";
import type { Database } from "../../../db/client.js";
import { messageEvents, messages } from "../../../db/schema.js";
import type { DeliveryError } from "../../../src/domain/delivery-outcome.js";
import { type Status, TERMINAL_STATUSES, TRANSITIONS } from "../../../src/domain/events.js";
import type { MessageRow } from "../../../src/store/projection.js";

/** One row of `message_events`, as stored. */
export type StoredEvent = typeof messageEvents.$inferSelect;

/** The union of every event's `data`, loose enough to read any field a test asserts on. */
export interface EventData {
  kind?: "attempt_started" | "retry_scheduled";
  attempt?: number;
  retryAt?: string;
  reason?: string;
  error?: DeliveryError;
  provider?: string;
  providerMessageId?: string;
}

export function dataOf(event: StoredEvent | undefined): EventData {
  return (event?.data ?? {}) as EventData;
}

/** The events of one message, straight from the table, in sequence order. */
export function eventsOf(db: Database, messageId: string): Promise<StoredEvent[]> {
  return db
    .select()
    .from(messageEvents)
    .where(eq(messageEvents.messageId, messageId))
    .orderBy(asc(messageEvents.seq));
}

export async function rowOf(db: Database, messageId: string): Promise<MessageRow | undefined> {
  const [row] = await db.select().from(messages).where(eq(messages.messageId, messageId));
  return row;
}

export const isAttemptStart = (event: StoredEvent) =>
  event.type === "pending" && dataOf(event).kind === "attempt_started";
export const isRetryScheduled = (event: StoredEvent) =>
  event.type === "pending" && dataOf(event).kind === "retry_scheduled";
/** Delivery attempts started (including one the domain starts only to record a passed TTL). */
export const attemptsOf = (events: readonly StoredEvent[]) => events.filter(isAttemptStart).length;

/** `accepted`, `pending:attempt_started`, `pending:retry_scheduled`, `success`, ... for readable diffs. */
export function shapeOf(events: readonly StoredEvent[]): string[] {
  return events.map((e) => (e.type === "pending" ? `pending:${dataOf(e).kind}` : e.type));
}

/**
 * Asserts the invariants every finished message's history must satisfy (DESIGN.md §2–3) and that
 * the `messages` record agrees with it:
 * - sequence numbers are 1..n without a gap, all of one message and one organization;
 * - every step is allowed by the transition table, starting from `accepted`;
 * - exactly one terminal event, and it is the last change of status (receipts, which change none,
 *   may come before or after it);
 * - attempts are numbered 1, 2, ...; a retry is only scheduled after an attempt started, and the
 *   next attempt never starts before the retry was due;
 * - retry_count grows by one exactly at each scheduled retry (transition table: pending → pending);
 * - the record's status, version, retry_count, created_at and updated_at are those of the events.
 */
export async function expectFinishedHistory(
  db: Database,
  messageId: string,
): Promise<{ events: StoredEvent[]; row: MessageRow }> {
  const events = await eventsOf(db, messageId);
  const row = await rowOf(db, messageId);
  if (!row) throw new Error(`no messages row for ${messageId}`);
  const shape = shapeOf(events).join(" → ");

  expect(
    events.map((e) => e.seq),
    shape,
  ).toEqual(events.map((_, index) => index + 1));
  expect(new Set(events.map((e) => e.organizationId))).toEqual(new Set([row.organizationId]));

  let from: Status | "initial" = "initial";
  let attempts = 0;
  let retryCount = 0;
  let dueAt: number | undefined;
  let previous: StoredEvent | undefined;
  for (const event of events) {
    expect(TRANSITIONS[from], `illegal ${from} → ${event.type} in ${shape}`).toContain(event.type);
    // A receipt keeps the status (and the retry count): the walk goes on from the same status,
    // and from the same previous status event (a receipt may come between an attempt's start and
    // its outcome; its time is when the provider's callback came, not the worker's clock).
    if (event.type === "receipt" || event.type === "delivery_delayed") {
      expect(event.retryCount, `retry_count of seq ${event.seq} in ${shape}`).toBe(retryCount);
      continue;
    }
    if (previous) expect(event.occurredAt.getTime()).toBeGreaterThanOrEqual(previous.occurredAt.getTime());
    if (isAttemptStart(event)) {
      attempts++;
      expect(dataOf(event).attempt, shape).toBe(attempts);
      if (dueAt !== undefined) expect(event.occurredAt.getTime(), shape).toBeGreaterThanOrEqual(dueAt);
      dueAt = undefined;
    } else if (isRetryScheduled(event)) {
      expect(previous && isAttemptStart(previous), `retry not after an attempt in ${shape}`).toBe(true);
      retryCount++;
      dueAt = Date.parse(String(dataOf(event).retryAt));
    } else if (event.type === "success") {
      expect(previous && isAttemptStart(previous), `success not after an attempt in ${shape}`).toBe(true);
      expect(dataOf(event).attempt).toBe(attempts);
    }
    expect(event.retryCount, `retry_count of seq ${event.seq} in ${shape}`).toBe(retryCount);
    from = event.type;
    previous = event;
  }

  const terminal = events.filter((e) => TERMINAL_STATUSES.includes(e.type as Status));
  expect(terminal, shape).toHaveLength(1);
  // The terminal event is the last change of status (receipts may follow it).
  const statusEvents = events.filter((e) => e.type !== "receipt" && e.type !== "delivery_delayed");
  expect(statusEvents.at(-1)).toBe(terminal[0]);

  const last = statusEvents.at(-1);
  const first = events[0];
  expect(row.status).toBe(last?.type);
  expect(row.version).toBe(events.length);
  expect(row.retryCount).toBe(retryCount);
  expect(row.createdAt).toEqual(first?.occurredAt);
  expect(row.updatedAt).toEqual(last?.occurredAt);
  return { events, row };
}
