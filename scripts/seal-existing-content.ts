import { createDatabase } from "../db/client.js";
import { ConfigError, configSchema, parseEnvironment } from "../src/runtime/config.js";
import { createContentVault } from "../src/store/content.js";
import { sealExistingContent } from "../src/store/seal-existing.js";

/**
 * `npm run content:seal-existing`: seals the content of the messages accepted before content was
 * encrypted at rest (docs/decisions/0034). Run it once after upgrading, with the processes'
 * CONTENT_MASTER_KEY; running it again finds nothing left to do.
 */
const settings = configSchema.pick({
  NODE_ENV: true,
  DATABASE_URL: true,
  CONTENT_MASTER_KEY: true,
  CONTENT_MASTER_KEY_ID: true,
  CONTENT_PREVIOUS_MASTER_KEYS: true,
  DATA_KEY_CACHE_TTL_MS: true,
});
const config = parseEnvironment(settings, process.env);
if (config.NODE_ENV === "production" && !config.CONTENT_MASTER_KEY) {
  throw new ConfigError("Invalid configuration:\n  CONTENT_MASTER_KEY: required when NODE_ENV=production");
}
const { sql } = createDatabase({ url: config.DATABASE_URL, poolSize: 2 });
const vault = createContentVault(sql, config, { warn: (message: string) => console.warn(message) });
const started = Date.now();
sealExistingContent(sql, vault, { onPage: (sealed) => console.log(`sealed ${sealed} messages so far`) })
  .then((count) => console.log(`sealed the content of ${count} messages in ${Date.now() - started} ms`))
  .catch((error: unknown) => {
    console.error("sealing failed:", error);
    process.exitCode = 1;
  })
  .finally(() => sql.end({ timeout: 5 }));
