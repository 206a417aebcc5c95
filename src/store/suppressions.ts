import { and, asc, eq, gt, inArray } from "drizzle-orm";
import type { Executor } from "../../db/client.js";
import { suppressions } from "../../db/schema.js";
import type { Channel } from "../domain/events.js";
import type { SuppressionReason } from "../domain/suppression.js";
import { UnreadableContentError } from "../runtime/content-crypto.js";
import type { ContentVault } from "./content.js";

/**
 * The suppression list (docs/decisions/0039). An entry is found by its recipient's blind index
 * under the organization's index key, the one its messages' `recipient_keys` use, so the worker
 * matches a message's recipients without opening anything; the recipient itself is sealed beside
 * it, for the listing only.
 */

/** An entry as the store writes it from a blind index (receipts, the worker). */
export interface NewSuppression {
  organizationId: string;
  channel: Channel;
  /** The recipient's blind index, as the message's `recipient_keys` hold it. */
  recipientKey: string;
  /** The recipient sealed by {@link ContentVault.sealRecipient} with {@link recipientBinding}; null: not known. */
  sealedRecipient?: Buffer | null;
  reason: SuppressionReason;
  /** The message whose outcome or receipt suppresses it. */
  messageId: string | null;
}

/** What a sealed recipient of the list is bound to: it opens only in its own entry. */
export function recipientBinding(channel: Channel, recipientKey: string): string {
  return `suppression|${channel}|${recipientKey}`;
}

/**
 * Adds entries; an entry already there for the recipient is kept as it is (its reason, message and
 * date: the first reason is the one the recipient gave). Returns the blind indexes added. This is
 * what receipts (Twilio's callbacks, bounces, complaints) call.
 */
export async function suppressRecipient(db: Executor, ...entries: NewSuppression[]): Promise<Set<string>> {
  if (entries.length === 0) return new Set();
  const added = await db
    .insert(suppressions)
    .values(
      entries.map((entry) => ({
        organizationId: entry.organizationId,
        channel: entry.channel,
        recipientKey: entry.recipientKey,
        recipientSealed: entry.sealedRecipient ?? null,
        reason: entry.reason,
        messageId: entry.messageId,
      })),
    )
    .onConflictDoNothing({
      target: [suppressions.organizationId, suppressions.channel, suppressions.recipientKey],
    })
    .returning({ recipientKey: suppressions.recipientKey, channel: suppressions.channel });
  return new Set(added.map((row) => `${row.channel}|${row.recipientKey}`));
}

/**
 * Columns of a {@link NewSuppression} as the receipts' append carries them (`json_to_recordset`;
 * `recipient_sealed` in base64): see {@link suppressionRows}.
 */
export const SUPPRESSION_INPUT = `organization_id uuid, channel text, recipient_key text, recipient_sealed text,
  reason text, message_id uuid`;

/** {@link NewSuppression}s as rows of {@link SUPPRESSION_INPUT}. */
export function suppressionRows(entries: readonly NewSuppression[]): Array<Record<string, string | null>> {
  return entries.map((entry) => ({
    organization_id: entry.organizationId,
    channel: entry.channel,
    recipient_key: entry.recipientKey,
    recipient_sealed: entry.sealedRecipient ? entry.sealedRecipient.toString("base64") : null,
    reason: entry.reason,
    message_id: entry.messageId,
  }));
}

/**
 * The INSERT of the entries of `source` (a relation of {@link SUPPRESSION_INPUT} rows) as a part of
 * a larger statement, keeping an entry already there as {@link suppressRecipient} does: the
 * receipts' append writes its event and its entry in one statement (src/store/events.ts).
 */
export function insertSuppressionsFrom(source: string): string {
  return `insert into suppressions (organization_id, channel, recipient_key, recipient_sealed, reason, message_id)
  select e.organization_id, e.channel, e.recipient_key, decode(e.recipient_sealed, 'base64'), e.reason, e.message_id
  from (select * from ${source}) e
  -- Not for an organization whose data was erased (no live data key): a receipt arriving after
  -- the erasure must not bring back an entry it deleted.
  where exists (select 1 from organization_data_keys k
    where k.organization_id = e.organization_id and k.wrapped_key is not null)
  on conflict (organization_id, channel, recipient_key) do nothing`;
}

/** An entry named by its recipient in clear: the store seals it and makes its blind index. */
export interface ClearSuppression {
  channel: Channel;
  /** As messages name it (normalised here: trimmed, lower case). */
  recipient: string;
  reason: SuppressionReason;
  messageId: string | null;
}

/**
 * Adds entries named in clear (the API's manual entries, the worker's outcomes). Returns, in
 * order, whether each was added (false: already on the list, or named twice).
 */
export async function suppressRecipients(
  db: Executor,
  vault: ContentVault,
  organizationId: string,
  entries: readonly ClearSuppression[],
): Promise<boolean[]> {
  const sealed = await Promise.all(
    entries.map((entry) =>
      vault.sealRecipient(organizationId, entry.recipient, (key) => recipientBinding(entry.channel, key)),
    ),
  );
  const added = await suppressRecipient(
    db,
    ...entries.map((entry, i) => ({
      organizationId,
      channel: entry.channel,
      recipientKey: sealed[i]?.recipientKey ?? "",
      sealedRecipient: sealed[i]?.sealed ?? null,
      reason: entry.reason,
      messageId: entry.messageId,
    })),
  );
  // Named twice in one request: the first is the one added.
  return entries.map((entry, i) => added.delete(`${entry.channel}|${sealed[i]?.recipientKey}`));
}

/** An entry as the listing shows it. */
export interface ListedSuppression {
  id: number;
  channel: Channel;
  /** Null after the recipient's content was erased, or for an entry added from a blind index alone. */
  recipient: string | null;
  reason: SuppressionReason;
  messageId: string | null;
  createdAt: Date;
}

/** One page of the organization's entries, oldest first, after the entry `afterId`. */
export async function pageOfSuppressions(
  db: Executor,
  vault: ContentVault,
  organizationId: string,
  page: { limit: number; afterId?: number; channel?: Channel; reason?: SuppressionReason },
): Promise<ListedSuppression[]> {
  const rows = await db
    .select()
    .from(suppressions)
    .where(
      and(
        eq(suppressions.organizationId, organizationId),
        page.afterId !== undefined ? gt(suppressions.id, page.afterId) : undefined,
        page.channel ? eq(suppressions.channel, page.channel) : undefined,
        page.reason ? eq(suppressions.reason, page.reason) : undefined,
      ),
    )
    .orderBy(asc(suppressions.id))
    .limit(page.limit);
  const opener = await vault.opener(rows.map((row) => row.recipientSealed));
  return rows.map((row) => {
    let recipient: string | null = null;
    try {
      const opened = opener.open(
        row.recipientSealed,
        organizationId,
        recipientBinding(row.channel, row.recipientKey),
      );
      recipient = typeof opened?.recipient === "string" ? opened.recipient : null;
    } catch (error) {
      if (!(error instanceof UnreadableContentError)) throw error;
    }
    return {
      id: row.id,
      channel: row.channel,
      recipient,
      reason: row.reason,
      messageId: row.messageId,
      createdAt: row.createdAt,
    };
  });
}

export type LiftResult = { lifted: true } | { lifted: false; reason?: SuppressionReason };

/**
 * Takes a recipient off the list. Without `force`, an entry of one of `protectedReasons` (the
 * recipient's own STOP or complaint) stays: `{ lifted: false, reason }`. Unknown: `{ lifted: false }`.
 */
export async function liftSuppression(
  db: Executor,
  vault: ContentVault,
  organizationId: string,
  entry: { channel: Channel; recipient: string },
  options: { force: boolean; protectedReasons: ReadonlySet<SuppressionReason> },
): Promise<LiftResult> {
  const keys = await vault.recipientKeys(organizationId, entry.recipient);
  if (keys.length === 0) return { lifted: false };
  const where = and(
    eq(suppressions.organizationId, organizationId),
    eq(suppressions.channel, entry.channel),
    inArray(suppressions.recipientKey, keys),
  );
  if (!options.force) {
    const found = await db.select({ reason: suppressions.reason }).from(suppressions).where(where);
    if (found.length === 0) return { lifted: false };
    const kept = found.find((row) => options.protectedReasons.has(row.reason));
    if (kept) return { lifted: false, reason: kept.reason };
  }
  const deleted = await db.delete(suppressions).where(where).returning({ id: suppressions.id });
  return deleted.length > 0 ? { lifted: true } : { lifted: false };
}
