import { and, eq, gt, lt, type SQL, sql } from "drizzle-orm";
import type { Executor } from "../../db/client.js";
import { messages } from "../../db/schema.js";
import type { Channel, Status } from "../domain/events.js";
import type { ContentVault } from "./content.js";
import type { MessageRow } from "./projection.js";
import { openRecords } from "./records.js";

/** Where the previous page ended: the last row's sort key. */
export interface ListCursor {
  createdAt: Date;
  messageId: string;
}

export interface ListFilters {
  status?: Status;
  channel?: Channel;
  /** Exclusive bounds on `created_at`. */
  createdAfter?: Date;
  createdBefore?: Date;
  /**
   * true: only scheduled sends still waiting for their `send_at` (not attempted, `send_at` after
   * `now`); false: every other message. Unset: all.
   */
  scheduled?: { waiting: boolean; now: Date };
  limit: number;
  after?: ListCursor;
}

/**
 * One page of an organization's messages, newest first (`created_at` desc, `message_id` desc,
 * the order of the index `messages_organization_created_idx`). Keyset pagination: the next page
 * starts strictly after `nextCursor`, so rows written meanwhile cause no duplicates or gaps.
 */
export async function pageOfMessages(
  db: Executor,
  vault: ContentVault,
  organizationId: string,
  filters: ListFilters,
): Promise<{ rows: MessageRow[]; nextCursor: ListCursor | null }> {
  const conditions: (SQL | undefined)[] = [
    eq(messages.organizationId, organizationId),
    filters.status && eq(messages.status, filters.status),
    filters.channel && eq(messages.channel, filters.channel),
    filters.createdAfter && gt(messages.createdAt, filters.createdAfter),
    filters.createdBefore && lt(messages.createdAt, filters.createdBefore),
    filters.scheduled && waitingForSendAt(filters.scheduled),
    filters.after &&
      sql`(${messages.createdAt}, ${messages.messageId}) < (${filters.after.createdAt.toISOString()}::timestamptz, ${filters.after.messageId}::uuid)`,
  ];
  const rows = await db
    .select()
    .from(messages)
    .where(and(...conditions))
    // NULLS LAST as in the index (drizzle-kit's default): with Postgres's DESC default, NULLS FIRST,
    // the index cannot give the order and Postgres reads and sorts all the organization's rows.
    .orderBy(sql`${messages.createdAt} desc nulls last`, sql`${messages.messageId} desc nulls last`)
    .limit(filters.limit + 1);
  const page = await openRecords(rows.slice(0, filters.limit), vault);
  const last = page.at(-1);
  return {
    rows: page,
    nextCursor:
      rows.length > filters.limit && last ? { createdAt: last.createdAt, messageId: last.messageId } : null,
  };
}

/**
 * The scheduled sends still waiting: `send_at is not null` first, which lets Postgres read the
 * partial index `messages_scheduled_idx` (an organization's few scheduled among its many sent).
 */
function waitingForSendAt({ waiting, now }: { waiting: boolean; now: Date }): SQL {
  const condition = sql`(${messages.sendAt} is not null and ${messages.sendAt} > ${now.toISOString()}::timestamptz and ${messages.status} = 'accepted')`;
  return waiting ? condition : sql`not ${condition}`;
}

/**
 * The cursor clients see: opaque, base64url of the last row's `created_at` and `message_id`.
 * Milliseconds are `created_at`'s full precision: it is always written from a JS `Date`.
 */
export function encodeCursor(cursor: ListCursor): string {
  return Buffer.from(`${cursor.createdAt.toISOString()}|${cursor.messageId}`).toString("base64url");
}

const CURSOR =
  /^(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z)\|([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})$/;

/** The cursor back, or undefined for anything {@link encodeCursor} did not make. */
export function decodeCursor(value: string): ListCursor | undefined {
  if (!/^[A-Za-z0-9_-]+$/.test(value)) return undefined;
  const match = CURSOR.exec(Buffer.from(value, "base64url").toString("utf8"));
  if (!match?.[1] || !match[2]) return undefined;
  const createdAt = new Date(match[1]);
  // The round trip refuses dates that do not exist (2026-02-30), which Postgres would refuse too.
  if (Number.isNaN(createdAt.getTime()) || createdAt.toISOString() !== match[1]) return undefined;
  return { createdAt, messageId: match[2] };
}
