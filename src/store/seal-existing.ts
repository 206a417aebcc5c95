import type postgres from "postgres";
import type { MessageContent } from "../domain/events.js";
import { byteaText, type ContentVault } from "./content.js";

/**
 * Seals the content of messages accepted before content was encrypted (docs/decisions/0034):
 * their `accepted` event gets its content sealed and keeps only the clear fields in `data` (the
 * append-only trigger lets exactly that through, in a transaction that says
 * `notify.sealing_content`), and their record drops the clear columns for the sealed copy. A page
 * at a time, each in one transaction; safe to run while the service runs, and to run again.
 * Returns how many messages were sealed.
 */
export async function sealExistingContent(
  sql: postgres.Sql,
  vault: ContentVault,
  options: { pageSize?: number; onPage?: (sealed: number) => void } = {},
): Promise<number> {
  const pageSize = options.pageSize ?? 500;
  let total = 0;
  let after = "00000000-0000-0000-0000-000000000000";
  for (;;) {
    // In message order, through the primary key (message_id, seq): `position` has no index since
    // the tables are partitioned (docs/decisions/0042). An `accepted` event is a message's first.
    const rows = await sql<Array<{ message_id: string; data: MessageContent }>>`
      select message_id, data from message_events
      where message_id > ${after}::uuid and seq = 1
        and type = 'accepted' and content_enc is null and data ? 'recipient'
      order by message_id limit ${pageSize}`;
    if (rows.length === 0) return total;
    const sealed = await Promise.all(
      rows.map(async ({ data }) => ({ data, stored: await vault.seal(data) })),
    );
    const input = sealed.map(({ data, stored }) => ({
      message_id: data.id,
      data: stored.clear,
      content_enc: byteaText(stored.sealed),
      recipient_keys: stored.recipientKeys,
    }));
    const keyIds = [...new Set(sealed.map(({ stored }) => stored.keyId))];
    const destroyed = await sql.begin(async (tx) => {
      // The keys stay live until this commits (an erasure's UPDATE waits), or the page is sealed
      // again: one destroyed by another process while this one had it cached would seal these
      // messages unreadable, where an erasure before this ran does not reach them (0034).
      const live = await tx<Array<{ id: string }>>`
        select id from organization_data_keys
        where id = any(${keyIds}::uuid[]) and wrapped_key is not null
        order by id for share`;
      if (live.length < keyIds.length) {
        const liveIds = new Set(live.map((row) => row.id));
        return keyIds.filter((id) => !liveIds.has(id));
      }
      await tx`select set_config('notify.sealing_content', 'on', true)`;
      const json = JSON.stringify(input);
      await tx.unsafe(
        `update message_events e set data = i.data, content_enc = i.content_enc, recipient_keys = i.recipient_keys
         from json_to_recordset($1::json) as i(message_id uuid, data jsonb, content_enc bytea, recipient_keys text[])
         where e.message_id = i.message_id and e.seq = 1 and e.content_enc is null`,
        [json],
      );
      await tx.unsafe(
        `update messages m set recipient = null, body = null, subject = null, template_fields = null,
           content_enc = i.content_enc, recipient_keys = i.recipient_keys
         from json_to_recordset($1::json) as i(message_id uuid, content_enc bytea, recipient_keys text[])
         where m.message_id = i.message_id and m.content_enc is null`,
        [json],
      );
      return [];
    });
    if (destroyed.length > 0) {
      for (const id of destroyed) vault.keys.forgetDestroyed(id);
      continue;
    }
    total += rows.length;
    options.onPage?.(total);
    after = rows[rows.length - 1]?.message_id ?? after;
  }
}
