import { serve } from "@hono/node-server";
import type { Queue } from "bullmq";
import { Hono } from "hono";
import type { Database } from "../db/client.js";
import type { Metrics } from "../src/observability/metrics.js";
import { operationsRoutes } from "../src/observability/operations.js";
import type { Logger } from "../src/runtime/logger.js";

/**
 * The worker's own small HTTP server: `/healthz`, `/readyz` and `/metrics` on
 * `WORKER_METRICS_PORT`. A port already taken (a second worker on one machine) is logged and
 * skipped: metrics are worth less than deliveries.
 */
export function startOpsServer(deps: {
  db: Database;
  queue: Queue;
  queues?: { readonly all: readonly Queue[] };
  metrics: Metrics;
  logger: Logger;
  port: number;
  /** The interface to listen on (`WORKER_METRICS_HOST`, loopback by default). */
  hostname: string;
  /** Why Redis refuses the worker's writes, while it does: /readyz then says not ready. */
  redisRefuses?: () => string | undefined;
}) {
  const app = new Hono();
  app.route("/", operationsRoutes(deps));
  const server = serve({ fetch: app.fetch, port: deps.port, hostname: deps.hostname }, (info) => {
    deps.logger.info(
      { port: info.port, host: deps.hostname },
      `worker metrics on ${deps.hostname}:${info.port}/metrics`,
    );
  });
  server.on("error", (error: NodeJS.ErrnoException) => {
    deps.logger.warn({ err: error, port: deps.port }, "worker metrics server not started");
  });
  return { close: () => new Promise<void>((resolve) => server.close(() => resolve())) };
}
