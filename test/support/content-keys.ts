import type { SqlClient } from "../../db/client.js";
import { createContentVault } from "../../src/store/content.js";

/** The master key of the tests' stacks (`CONTENT_MASTER_KEY`): 32 bytes, base64. */
export const TEST_MASTER_KEY = Buffer.alloc(32, 7).toString("base64");

/** The content settings every test stack and test process runs with (docs/decisions/0034). */
export const TEST_CONTENT_KEYS = {
  CONTENT_MASTER_KEY: TEST_MASTER_KEY,
  CONTENT_MASTER_KEY_ID: "test",
} as const;

/** A content vault under {@link TEST_MASTER_KEY}, as the processes make theirs. */
export function testContentVault(sql: SqlClient, cacheTtlMs = 60_000) {
  return createContentVault(sql, {
    ...TEST_CONTENT_KEYS,
    CONTENT_PREVIOUS_MASTER_KEYS: undefined,
    DATA_KEY_CACHE_TTL_MS: cacheTtlMs,
  });
}
