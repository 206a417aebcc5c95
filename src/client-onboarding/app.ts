import { OpenAPIHono } from "@hono/zod-openapi";
import type { Hono } from "hono";
import { bodyLimit } from "hono/body-limit";
import { clientLimitKey } from "../http/client-ip.js";
import { errorResponse, handleError } from "../http/errors.js";
import { MAX_BODY_BYTES } from "../http/json-body.js";
import { openapiRoute, serveDocs, validationHook } from "../http/openapi.js";
import { requestId } from "../http/request-id.js";
import { onboardClient, onboardRoute } from "./onboard.js";
import { rateLimitByClient } from "./rate-limit.js";
import type { ClientOnboardingDeps, ClientOnboardingEnv } from "./types.js";

/** Builds the client-onboarding service. No I/O happens here: connections come in through `deps`. */
export function createClientOnboardingApp(deps: ClientOnboardingDeps): Hono<ClientOnboardingEnv> {
  const app = new OpenAPIHono<ClientOnboardingEnv>({ defaultHook: validationHook });

  app.use(requestId());
  app.use(
    bodyLimit({
      maxSize: MAX_BODY_BYTES,
      onError: (c) => errorResponse(c, 413, `Request body must be at most ${MAX_BODY_BYTES / 1024} KiB`),
    }),
  );

  app.get("/healthz", (c) => c.json({ status: "ok" }));

  const rateLimit = rateLimitByClient({
    limit: deps.config.ONBOARD_RATE_LIMIT,
    windowMs: deps.config.ONBOARD_RATE_WINDOW_MS,
    clientKey: (c) => clientLimitKey(deps.clientIp(c)),
  });
  openapiRoute(app, onboardRoute, [rateLimit], (c) => onboardClient(c, deps));
  serveDocs(app, {
    title: "Encryption service",
    description:
      'Client onboarding: register an app and get its API key. Every error is JSON `{ "error": "…" }`.',
  });

  app.notFound((c) => errorResponse(c, 404, `No route for ${c.req.method} ${c.req.path}`));
  app.onError(handleError(deps.logger));
  return app;
}
