import { and, asc, count, eq, isNull } from "drizzle-orm";
import type { Executor } from "../../db/client.js";
import { isUniqueViolation } from "../../db/errors.js";
import { organizationSenders, organizations } from "../../db/schema.js";
import type { SenderKind, SenderStatus } from "../domain/senders.js";

/** An organization's sender, as stored (docs/decisions/0033). */
export interface Sender {
  id: string;
  organizationId: string;
  kind: SenderKind;
  value: string;
  verificationToken: string | null;
  status: SenderStatus;
  createdAt: Date;
  verifiedAt: Date | null;
}

const columns = {
  id: organizationSenders.id,
  organizationId: organizationSenders.organizationId,
  kind: organizationSenders.kind,
  value: organizationSenders.value,
  verificationToken: organizationSenders.verificationToken,
  status: organizationSenders.status,
  createdAt: organizationSenders.createdAt,
  verifiedAt: organizationSenders.verifiedAt,
};

/** Registers a sender, pending; undefined when the organization already has it (of that kind). */
export async function createSender(
  db: Executor,
  sender: Omit<Sender, "status" | "verifiedAt">,
): Promise<Sender | undefined> {
  try {
    const [row] = await db
      .insert(organizationSenders)
      .values({ ...sender, status: "pending" })
      .returning(columns);
    return row;
  } catch (error) {
    if (isUniqueViolation(error)) return undefined;
    throw error;
  }
}

/** How many senders the organization has, of every kind and status. */
export async function countSenders(db: Executor, organizationId: string): Promise<number> {
  const [row] = await db
    .select({ count: count() })
    .from(organizationSenders)
    .where(eq(organizationSenders.organizationId, organizationId));
  return row?.count ?? 0;
}

/** The organization's senders, oldest first. */
export async function listSenders(db: Executor, organizationId: string): Promise<Sender[]> {
  return db
    .select(columns)
    .from(organizationSenders)
    .where(eq(organizationSenders.organizationId, organizationId))
    .orderBy(asc(organizationSenders.createdAt), asc(organizationSenders.id));
}

/** One of the organization's senders; another organization's is undefined, like an unknown one. */
export async function findSender(
  db: Executor,
  organizationId: string,
  id: string,
): Promise<Sender | undefined> {
  const [row] = await db
    .select(columns)
    .from(organizationSenders)
    .where(and(eq(organizationSenders.organizationId, organizationId), eq(organizationSenders.id, id)))
    .limit(1);
  return row;
}

/** A sender by its id alone, for the operator's command; the API always scopes by organization. */
export async function findSenderById(db: Executor, id: string): Promise<Sender | undefined> {
  const [row] = await db
    .select(columns)
    .from(organizationSenders)
    .where(eq(organizationSenders.id, id))
    .limit(1);
  return row;
}

/** Deletes one of the organization's senders; false when it has no such sender. */
export async function deleteSender(db: Executor, organizationId: string, id: string): Promise<boolean> {
  const deleted = await db
    .delete(organizationSenders)
    .where(and(eq(organizationSenders.organizationId, organizationId), eq(organizationSenders.id, id)))
    .returning({ id: organizationSenders.id });
  return deleted.length > 0;
}

/**
 * Marks one sender verified (a domain whose TXT record was found, an SMS sender an operator
 * approved); a sender already verified keeps its first `verified_at`. Scoped by organization when
 * one is given (the API); the operator's command names the sender by its id alone.
 */
export async function markVerified(
  db: Executor,
  id: string,
  now: Date,
  organizationId?: string,
): Promise<Sender | undefined> {
  const scope = organizationId
    ? and(eq(organizationSenders.id, id), eq(organizationSenders.organizationId, organizationId))
    : eq(organizationSenders.id, id);
  const [updated] = await db
    .update(organizationSenders)
    .set({ status: "verified", verifiedAt: now })
    .where(and(scope, isNull(organizationSenders.verifiedAt)))
    .returning(columns);
  if (updated) return updated;
  const [existing] = await db.select(columns).from(organizationSenders).where(scope).limit(1);
  return existing;
}

/** The organization's verified senders, as `kind:value` keys (what the accept path compares). */
export async function verifiedSenderKeys(db: Executor, organizationId: string): Promise<string[]> {
  const rows = await db
    .select({ kind: organizationSenders.kind, value: organizationSenders.value })
    .from(organizationSenders)
    .where(
      and(eq(organizationSenders.organizationId, organizationId), eq(organizationSenders.status, "verified")),
    );
  return rows.map((row) => senderKey(row.kind, row.value));
}

/** How a sender is compared: its kind and its normalised value. */
export function senderKey(kind: SenderKind, value: string): string {
  return `${kind}:${value}`;
}

export interface PendingSender extends Sender {
  organizationName: string;
  productId: string;
}

/** Every sender awaiting an operator (SMS senders) or its DNS record (domains), oldest first. */
export async function listPendingSenders(db: Executor, kind?: SenderKind): Promise<PendingSender[]> {
  return db
    .select({ ...columns, organizationName: organizations.name, productId: organizations.productId })
    .from(organizationSenders)
    .innerJoin(organizations, eq(organizations.id, organizationSenders.organizationId))
    .where(
      and(eq(organizationSenders.status, "pending"), kind ? eq(organizationSenders.kind, kind) : undefined),
    )
    .orderBy(asc(organizationSenders.createdAt), asc(organizationSenders.id));
}
