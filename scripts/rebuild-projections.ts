import { createDatabase } from "../db/client.js";
import { configSchema, parseEnvironment } from "../src/runtime/config.js";
import { rebuildProjections } from "../src/store/rebuild.js";

/** `npm run projections:rebuild`: recomputes every message record from its events. */
// Only the database matters here: the providers a production config must name do not.
const { DATABASE_URL } = parseEnvironment(configSchema.pick({ DATABASE_URL: true }), process.env);
const { sql } = createDatabase({ url: DATABASE_URL, poolSize: 2 });
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
