import type postgres from "postgres";
import type { SqlClient } from "../../db/client.js";
import { blindIndex } from "../runtime/content-crypto.js";
import { type ContentVault, normaliseRecipient } from "./content.js";

/**
 * Erasing message content (docs/decisions/0034). The log keeps every event, in order, with its
 * type, status, timestamps and clear fields; only the sealed content goes, so the projection and
 * the rebuild go on folding the same events.
 */

/**
 * Erases everything an organization's messages said: destroys its data keys (crypto-shredding:
 * every sealed content of its messages, in events and records, can no longer be opened) and its
 * `Idempotency-Key` claims, and deletes its webhook endpoints (their URLs and descriptions are
 * its own; their pending deliveries are never sent after that, and the worker's purge deletes
 * them and their attempts, workers/webhook-purger.ts) and its suppression list, so nothing about
 * its messages leaves the service afterwards. Its next send gets a new key. Returns how many keys
 * were destroyed.
 */
export async function eraseOrganizationContent(
  sql: SqlClient,
  vault: ContentVault,
  organizationId: string,
): Promise<number> {
  const destroyed = await vault.keys.destroyAll(organizationId);
  await sql`delete from idempotency_keys where organization_id = ${organizationId}`;
  await sql`delete from webhook_endpoints where organization_id = ${organizationId}`;
  // Its suppression list: the blind indexes are under the keys just destroyed, so they would
  // match none of its next messages (sealed under a new key); kept, they would only be a list
  // of who it wrote to (docs/decisions/0039).
  await sql`delete from suppressions where organization_id = ${organizationId}`;
  return destroyed;
}

/**
 * Erases the content of the organization's messages to `recipient` (any of their recipients, for
 * an e-mail): their sealed content and blind indexes become null, in the `accepted` events (the
 * one change the append-only trigger lets through, in a transaction that says so) and in the
 * records, together, and deletes their `Idempotency-Key` claims (found through the GIN index on
 * `recipient_keys`). Its suppression entries keep their blind index and lose the sealed recipient. Messages already on their way may still be delivered; one not yet started
 * is rejected (`content_erased`). Returns the ids of the messages erased.
 */
export async function eraseRecipientContent(
  sql: postgres.Sql,
  vault: ContentVault,
  organizationId: string,
  recipient: string,
): Promise<string[]> {
  const keys = await vault.keys.liveKeys(organizationId);
  if (keys.length === 0) return [];
  const digests = keys.map((key) => blindIndex(key.indexKey, normaliseRecipient(recipient)));
  return sql.begin(async (tx) => {
    await tx`select set_config('notify.erasing_content', 'on', true)`;
    // Its suppression entries stay, index only: a recipient who said STOP (or complained, or
    // bounced) is still not written to after being forgotten (docs/decisions/0039).
    await tx`
      update suppressions set recipient_sealed = null
      where organization_id = ${organizationId} and recipient_key = any(${digests}::text[])
        and recipient_sealed is not null`;
    const erased = await tx<Array<{ message_id: string }>>`
      update messages set content_enc = null, recipient_keys = null
      where organization_id = ${organizationId} and recipient_keys && ${digests}::text[]
      returning message_id`;
    const ids = erased.map((row) => row.message_id);
    if (ids.length > 0) {
      await tx`
        update message_events set content_enc = null, recipient_keys = null
        where message_id = any(${ids}::uuid[]) and seq = 1 and organization_id = ${organizationId}`;
      // Their `Idempotency-Key` claims hold a keyed hash of the request, content included.
      await tx`
        delete from idempotency_keys
        where organization_id = ${organizationId} and message_id = any(${ids}::uuid[])`;
    }
    return ids;
  });
}
