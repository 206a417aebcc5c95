import { Hono } from "hono";
import { bodyLimit } from "hono/body-limit";
import { requestId } from "hono/request-id";
import { apiKeyAuth } from "./http/api-key-auth.js";
import { errorResponse, handleError } from "./http/errors.js";
import { MAX_BODY_BYTES } from "./http/json-body.js";
import { onboardingAuth } from "./http/onboarding-auth.js";
import type { AppDeps, AppEnv } from "./http/types.js";
import { routes } from "./routes/index.js";

/** Builds the notification API. No I/O happens here: connections come in through `deps`. */
export function createApp(deps: AppDeps): Hono<AppEnv> {
  const app = new Hono<AppEnv>();
  const authFor = {
    "api-key": apiKeyAuth(deps),
    onboarding: onboardingAuth(deps.config.ONBOARDING_TOKEN),
  };

  app.use(
    requestId({
      headerName: "X-Request-Id",
      limitLength: 200,
    }),
  );
  app.use(
    bodyLimit({
      maxSize: MAX_BODY_BYTES,
      onError: (c) => errorResponse(c, 413, `Request body must be at most ${MAX_BODY_BYTES / 1024} KiB`),
    }),
  );

  app.get("/healthz", (c) => c.json({ status: "ok" }));

  for (const route of routes) {
    app.on(route.method.toUpperCase(), route.path, authFor[route.auth], (c) => route.handler(c, deps));
  }

  app.notFound((c) => errorResponse(c, 404, `No route for ${c.req.method} ${c.req.path}`));
  app.onError(handleError(deps.logger));
  return app;
}
