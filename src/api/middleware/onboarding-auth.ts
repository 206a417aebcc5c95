import type { MiddlewareHandler } from "hono";
import { ApiError } from "../../http/errors.js";
import { requestHeader } from "../../http/node-request.js";
import { secretsEqual } from "../../runtime/api-keys.js";
import type { AppEnv } from "../types.js";

/** When an onboarding token is configured, onboarding needs `Authorization: Bearer <token>`. */
export function onboardingAuth(token: string | undefined): MiddlewareHandler<AppEnv> {
  return async function authenticateOnboarding(c, next) {
    if (token) {
      const header = requestHeader(c, "authorization") ?? "";
      const match = /^Bearer (.+)$/i.exec(header);
      if (!match?.[1] || !secretsEqual(match[1], token)) {
        throw new ApiError(401, "Missing or invalid onboarding token", {
          "WWW-Authenticate": 'Bearer realm="onboarding"',
        });
      }
    }
    await next();
  };
}
