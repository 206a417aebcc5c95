import type { Queue } from "bullmq";
import { sql } from "drizzle-orm";
import { Hono } from "hono";
import type { Redis } from "ioredis";
import type { Database } from "../../db/client.js";

const CHECK_TIMEOUT_MS = 1000;

/**
 * "ok", "no answer" (none within a second) or "unavailable". Never the error's own text: the
 * endpoint is public, and a driver's message names internal hosts and ports (logs have them).
 */
async function check(probe: () => Promise<unknown>): Promise<string> {
  let timer: NodeJS.Timeout | undefined;
  const noAnswer = Symbol("no answer");
  try {
    const answered = await Promise.race([
      probe(),
      new Promise((resolve) => {
        timer = setTimeout(() => resolve(noAnswer), CHECK_TIMEOUT_MS);
      }),
    ]);
    return answered === noAnswer ? "no answer" : "ok";
  } catch {
    return "unavailable";
  } finally {
    clearTimeout(timer);
  }
}

/** `/healthz`: the process is alive (200 `{"status":"ok"}`); it says nothing else, so it may be public. */
export function livenessRoute(): Hono {
  const app = new Hono();
  app.get("/healthz", (c) => c.json({ status: "ok" }));
  return app;
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
  const app = livenessRoute();
  app.get("/readyz", async (c) => {
    const [postgres, redis] = await Promise.all([
      check(() => deps.db.execute(sql`select 1`)),
      check(async () => ((await deps.queue.client) as unknown as Redis).ping()).then((answer) =>
        answer === "ok" ? (deps.redisRefuses?.() ?? answer) : answer,
      ),
    ]);
    const ready = postgres === "ok" && redis === "ok";
    return c.json(
      { status: ready ? "ready" : "unavailable", checks: { postgres, redis } },
      ready ? 200 : 503,
    );
  });
  return app;
}
