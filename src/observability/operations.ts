import type { Queue } from "bullmq";
import { type Context, Hono } from "hono";
import type { Database } from "../../db/client.js";
import { clientLimitKey } from "../http/client-ip.js";
import { securePage } from "../http/response-headers.js";
import { healthRoutes } from "./health.js";
import type { Metrics } from "./metrics.js";

const QUEUE_BOARD_PATH = "/admin/queues";

/**
 * The operator's endpoints, the same on every process that serves HTTP: `/healthz`, `/readyz`,
 * `/metrics`, and Bull Board at `/admin/queues` when `ADMIN_USER` / `ADMIN_PASSWORD` are set
 * (absent, so 404, otherwise). The API serves them on its public port, or, with `OPS_PORT`, on
 * that port alone (src/api/ops-app.ts); the worker on its own (workers/ops-server.ts). Bull Board and its UI are loaded on the first visit: they are
 * memory the API process does not otherwise need.
 */
export function operationsRoutes(deps: {
  db: Database;
  queue: Queue;
  /** Every shard of the delivery queue, for the dashboard; unset: `queue` alone. */
  queues?: { readonly all: readonly Queue[] };
  metrics: Metrics;
  redisRefuses?: () => string | undefined;
  admin?: { user: string; password: string };
  /** The client's address (src/http/client-ip.ts): the dashboard's failed logins are counted by it. */
  clientIp?: (c: Context) => string;
}): Hono {
  const app = new Hono();
  app.route("/", healthRoutes(deps));
  app.get("/metrics", async (c) => {
    const body = await deps.metrics.scrape();
    return c.body(body, 200, { "Content-Type": deps.metrics.registry.contentType });
  });
  const { admin, clientIp = () => "unknown" } = deps;
  if (admin) {
    let board: Promise<Hono> | undefined;
    const serveBoard = async (c: Context) => {
      board ??= import("./queue-board.js").then(({ queueBoard }) => {
        const mounted = new Hono().route(
          QUEUE_BOARD_PATH,
          queueBoard({
            basePath: QUEUE_BOARD_PATH,
            queues: deps.queues ? [...deps.queues.all] : [deps.queue],
            ...admin,
            clientKey: (c) => clientLimitKey(clientIp(c)),
          }),
        );
        // Errors (basic auth's 401) go on to the app's own handler, which answers `{ error }`.
        return mounted.onError((error) => {
          throw error;
        });
      });
      return securePage(await (await board).fetch(c.req.raw, c.env));
    };
    app.all(QUEUE_BOARD_PATH, serveBoard);
    app.all(`${QUEUE_BOARD_PATH}/*`, serveBoard);
  }
  return app;
}

export function adminCredentials(config: { ADMIN_USER?: string; ADMIN_PASSWORD?: string }) {
  return config.ADMIN_USER && config.ADMIN_PASSWORD
    ? { user: config.ADMIN_USER, password: config.ADMIN_PASSWORD }
    : undefined;
}
