import type { Queue } from "bullmq";
import { Hono } from "hono";
import type { Database } from "../../db/client.js";
import { healthRoutes } from "./health.js";
import type { Metrics } from "./metrics.js";
import { QUEUE_BOARD_PATH, queueBoard } from "./queue-board.js";

/**
 * The operator's endpoints, the same on every process that serves HTTP: `/healthz`, `/readyz`,
 * `/metrics`, and Bull Board at `/admin/queues` when `ADMIN_USER` / `ADMIN_PASSWORD` are set
 * (absent, so 404, otherwise).
 */
export function operationsRoutes(deps: {
  db: Database;
  queue: Queue;
  metrics: Metrics;
  admin?: { user: string; password: string };
}): Hono {
  const app = new Hono();
  app.route("/", healthRoutes(deps));
  app.get("/metrics", async (c) => {
    const body = await deps.metrics.registry.metrics();
    return c.body(body, 200, { "Content-Type": deps.metrics.registry.contentType });
  });
  if (deps.admin) app.route(QUEUE_BOARD_PATH, queueBoard({ queues: [deps.queue], ...deps.admin }));
  return app;
}

export function adminCredentials(config: { ADMIN_USER?: string; ADMIN_PASSWORD?: string }) {
  return config.ADMIN_USER && config.ADMIN_PASSWORD
    ? { user: config.ADMIN_USER, password: config.ADMIN_PASSWORD }
    : undefined;
}
