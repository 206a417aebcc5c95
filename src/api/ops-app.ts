import { Hono } from "hono";
import { clientIpResolver } from "../http/client-ip.js";
import { errorResponse, handleError } from "../http/errors.js";
import { MAX_BODY_BYTES } from "../http/json-body.js";
import { requestId } from "../http/request-id.js";
import { adminCredentials, operationsRoutes } from "../observability/operations.js";
import { requestLog } from "./middleware/request-log.js";
import { bodyLimit } from "./register-routes.js";
import type { AppDeps, AppEnv } from "./types.js";

/**
 * The API's operator port (`OPS_PORT`): `/healthz`, `/readyz`, `/metrics` and Bull Board at
 * `/admin/queues`, which the public app then no longer serves. Logged and measured like any
 * request; every error is `{ error }`. No I/O happens here.
 */
export function createOpsApp(deps: AppDeps): Hono<AppEnv> {
  const app = new Hono<AppEnv>();
  app.use(requestId());
  // The dashboard's actions are the only bodies here.
  app.use("/admin/*", bodyLimit(MAX_BODY_BYTES));
  app.use(requestLog(deps.logger, deps.metrics));
  // Reached directly, never through the public proxy: X-Forwarded-For here is the client's own claim.
  app.route("/", operatorRoutes(deps, { trustProxy: false }));
  app.notFound((c) => errorResponse(c, 404, `No route for ${c.req.method} ${c.req.path}`));
  app.onError(handleError(deps.logger));
  return app;
}

/**
 * The operator's endpoints with the API's settings: the dashboard's logins counted by client IP,
 * taken from `X-Forwarded-For` only when `trustProxy` (the public port's copy, behind `TRUST_PROXY`).
 */
export function operatorRoutes(deps: AppDeps, { trustProxy }: { trustProxy: boolean }): Hono {
  return operationsRoutes({
    ...deps,
    admin: adminCredentials(deps.config),
    clientIp: clientIpResolver(trustProxy),
  });
}
