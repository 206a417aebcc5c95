import type { SqlClient } from "../../db/client.js";
import { IDEMPOTENCY_WINDOW_MS } from "./accept-batcher.js";

/**
 * Whether the organization holds `key` as a live `Idempotency-Key` at `at` (claimed less than
 * {@link IDEMPOTENCY_WINDOW_MS} before): a request carrying it would be answered from what it
 * recorded, not accepted again. One read of the primary key (organization, key).
 */
export async function holdsIdempotencyKey(
  sql: SqlClient,
  organizationId: string,
  key: string,
  at: Date,
): Promise<boolean> {
  const rows = await sql<Array<{ held: number }>>`
    select 1 as held from idempotency_keys
    where organization_id = ${organizationId} and key = ${key}
      and created_at >= ${new Date(at.getTime() - IDEMPOTENCY_WINDOW_MS).toISOString()}::timestamptz`;
  return rows.length > 0;
}
