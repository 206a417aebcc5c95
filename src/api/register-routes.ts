import type { OpenAPIHono } from "@hono/zod-openapi";
import type { MiddlewareHandler, Next } from "hono";
import { headerBodyLimit } from "../http/body-limit.js";
import { errorResponse } from "../http/errors.js";
import { MAX_BODY_BYTES } from "../http/json-body.js";
import { openapiRoute, withRateLimitHeaders } from "../http/openapi.js";
import { apiKeyAuth } from "./middleware/api-key-auth.js";
import { createDailyQuota, sendDailyQuota } from "./middleware/daily-quota.js";
import { onboardingAuth } from "./middleware/onboarding-auth.js";
import {
  previewRateLimit,
  sendBucket,
  senderVerifyRateLimit,
  sendRateLimit,
  webhookRecoverRateLimit,
  webhookTestRateLimit,
} from "./middleware/rate-limit.js";
import type { SendLimits } from "./middleware/send-limits.js";
import type { AppContext, AppDeps, AppEnv, Route } from "./types.js";

/**
 * Mounts every route behind its authentication, and documents each with the security scheme
 * of that authentication, so the document cannot disagree with the middleware that runs.
 */
export function registerRoutes(app: OpenAPIHono<AppEnv>, routes: readonly Route[], deps: AppDeps): void {
  const auth = {
    "api-key": { middleware: apiKeyAuth(deps), scheme: "ApiKeyAuth" },
    onboarding: { middleware: onboardingAuth(deps.config.ONBOARDING_TOKEN), scheme: "OnboardingBearer" },
  } as const;
  app.openAPIRegistry.registerComponent("securitySchemes", "ApiKeyAuth", {
    type: "apiKey",
    in: "header",
    name: "x-api-key",
    description: "The organization's API key (`ntf_…`), from onboarding",
  });
  app.openAPIRegistry.registerComponent("securitySchemes", "OnboardingBearer", {
    type: "http",
    scheme: "bearer",
    description: "`ONBOARDING_TOKEN`; required when it is set (always in production)",
  });

  // A send passes its rate first, so a refused burst never takes from the day's quota. A batch's
  // handler takes one of each per item it validated (src/api/routes/notifications/send-batch.ts).
  const sendLimits: SendLimits = { rate: sendBucket(deps), quota: createDailyQuota(deps) };
  const limits = {
    send: [sendRateLimit(deps, sendLimits.rate), sendDailyQuota(deps, sendLimits.quota)],
    "send-items": [
      async function provideSendLimits(c: AppContext, next: Next) {
        c.set("sendLimits", sendLimits);
        await next();
      },
    ],
    preview: [previewRateLimit(deps)],
    "sender-verify": [senderVerifyRateLimit(deps)],
    "webhook-test": [webhookTestRateLimit(deps)],
    "webhook-recover": [webhookRecoverRateLimit(deps)],
  };

  for (const route of routes) {
    const { middleware, scheme } = auth[route.auth];
    // A batch's limits refuse items, not the request: its route documents the fields itself.
    const limited =
      route.rateLimit && route.rateLimit !== "send-items"
        ? withRateLimitHeaders(route.definition)
        : route.definition;
    const definition = { ...limited, security: [{ [scheme]: [] }] };
    const chain = [bodyLimit(route.maxBodyBytes ?? MAX_BODY_BYTES), middleware];
    if (route.rateLimit) chain.push(...limits[route.rateLimit]);
    openapiRoute(app, definition, chain, (c) => route.handler(c, deps));
  }
}

export function bodyLimit(maxBytes: number): MiddlewareHandler {
  return headerBodyLimit({
    maxSize: maxBytes,
    onError: (c) => errorResponse(c, 413, `Request body must be at most ${maxBytes / 1024} KiB`),
  });
}
