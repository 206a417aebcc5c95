import { createDatabase } from "../db/client.js";
import { loadConfig } from "../src/runtime/config.js";
import { rebuildProjections } from "../src/store/rebuild.js";

/** `npm run projections:rebuild`: recomputes every message record from its events. */
const config = loadConfig();
const { sql } = createDatabase({ url: config.DATABASE_URL, poolSize: 2 });
const started = Date.now();
rebuildProjections(sql)
  .then((count) =>
    console.log(`rebuilt ${count} message records from their events in ${Date.now() - started} ms`),
  )
  .catch((error: unknown) => {
    console.error("rebuild failed:", error);
    process.exitCode = 1;
  })
  .finally(() => sql.end({ timeout: 5 }));
