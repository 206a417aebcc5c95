import type { Queue } from "bullmq";
import { sql } from "drizzle-orm";
import { Hono } from "hono";
import type { Redis } from "ioredis";
import type { Database } from "../../db/client.js";

const CHECK_TIMEOUT_MS = 1000;

async function check(probe: () => Promise<unknown>): Promise<string> {
  let timer: NodeJS.Timeout | undefined;
  try {
    await Promise.race([
      probe(),
      new Promise((_, reject) => {
        timer = setTimeout(
          () => reject(new Error(`no answer within ${CHECK_TIMEOUT_MS} ms`)),
          CHECK_TIMEOUT_MS,
        );
      }),
    ]);
    return "ok";
  } catch (error) {
    return error instanceof Error && error.message ? error.message : "unreachable";
  } finally {
    clearTimeout(timer);
  }
}

/**
 * `/healthz`: the process is alive. `/readyz`: Postgres and Redis both answer within a second
 * (200), or which one does not (503). Both JSON. `redisRefuses` (the worker's): why Redis, though
 * it answers, refuses the writes the process needs, if it does; the process is then not ready.
 */
export function healthRoutes(deps: {
  db: Database;
  queue: Queue;
  redisRefuses?: () => string | undefined;
}): Hono {
  const app = new Hono();
  app.get("/healthz", (c) => c.json({ status: "ok" }));
  app.get("/readyz", async (c) => {
    const [postgres, redis] = await Promise.all([
      check(() => deps.db.execute(sql`select 1`)),
      check(async () => {
        await ((await deps.queue.client) as unknown as Redis).ping();
        const refused = deps.redisRefuses?.();
        if (refused) throw new Error(refused);
      }),
    ]);
    const ready = postgres === "ok" && redis === "ok";
    return c.json(
      { status: ready ? "ready" : "unavailable", checks: { postgres, redis } },
      ready ? 200 : 503,
    );
  });
  return app;
}
