import { OpenAPIHono } from "@hono/zod-openapi";
import type { Hono } from "hono";
import { HTTPException } from "hono/http-exception";
import { timeout } from "hono/timeout";
import { errorResponse, handleError } from "../http/errors.js";
import { MAX_BODY_BYTES } from "../http/json-body.js";
import { serveDocs, validationHook } from "../http/openapi.js";
import { requestId } from "../http/request-id.js";
import { noStore } from "../http/response-headers.js";
import { livenessRoute } from "../observability/health.js";
import { requestLog } from "./middleware/request-log.js";
import { operatorRoutes } from "./ops-app.js";
import { bodyLimit, registerRoutes } from "./register-routes.js";
import { twilioSmsCallbacks } from "./routes/callbacks/twilio-sms.js";
import { apiInfo, routes } from "./routes/index.js";
import type { AppDeps, AppEnv } from "./types.js";
import { registerWebhookEvents } from "./wire/webhook-events.js";

/** Builds the notification API. No I/O happens here: connections come in through `deps`. */
export function createApp(deps: AppDeps): Hono<AppEnv> {
  const app = new OpenAPIHono<AppEnv>({ defaultHook: validationHook });

  app.use(requestId());
  app.use(
    timeout(
      deps.config.REQUEST_TIMEOUT_MS,
      () =>
        new HTTPException(503, {
          message: "Service temporarily unavailable; retry shortly",
          res: new Response(null, { headers: { "Retry-After": "5" } }),
        }),
    ),
  );
  // Each API route limits its own body (registerRoutes); the dashboard's actions get the default.
  app.use("/admin/*", bodyLimit(MAX_BODY_BYTES));
  app.use("/api/*", noStore());

  app.use(requestLog(deps.logger, deps.metrics));
  // With an operator port, the public one keeps only what a router's health check needs.
  app.route(
    "/",
    deps.config.OPS_PORT === undefined
      ? operatorRoutes(deps, { trustProxy: deps.config.TRUST_PROXY })
      : livenessRoute(),
  );

  // Providers' receipts: public, authenticated by each provider's own signature.
  app.route("/", twilioSmsCallbacks(deps));
  registerRoutes(app, routes, deps);
  registerWebhookEvents(app.openAPIRegistry);
  serveDocs(app, apiInfo);

  app.notFound((c) => errorResponse(c, 404, `No route for ${c.req.method} ${c.req.path}`));
  app.onError(handleError(deps.logger));
  return app;
}
