import { z } from "zod";
import { keyPrefix } from "../api-keys.js";
import { ApiError } from "../http/errors.js";
import { parseJsonBody } from "../http/json-body.js";
import { AppNameTakenError, registerClient } from "./clients.js";
import type { EncryptionContext, EncryptionDeps } from "./types.js";

export const ONBOARD_PATH = "/encryption-service/api/v1/onboard";

const requiredString = z.string({
  error: (issue) => (issue.input === undefined ? "is required" : "must be a string"),
});

const body = z.strictObject({
  appName: requiredString.trim().min(1, "must not be empty").max(100, "must be at most 100 characters"),
  contactEmail: requiredString
    .trim()
    .max(254, "must be at most 254 characters")
    .pipe(z.email("must be a valid e-mail address")),
});

/** POST /encryption-service/api/v1/onboard: registers a client app and returns its key, once. */
export async function onboardClient(c: EncryptionContext, deps: EncryptionDeps): Promise<Response> {
  // parseJsonBody reads only `c.req`, but is typed with the web API's context: widen ours.
  const input = await parseJsonBody(c, body);
  try {
    const client = await registerClient(deps.db, input);
    deps.logger.info(
      {
        clientId: client.id,
        appName: client.appName,
        apiKeyPrefix: keyPrefix(client.apiKey),
        requestId: c.get("requestId"),
      },
      "client onboarded",
    );
    // The response carries a secret: no cache may keep it.
    c.header("Cache-Control", "no-store");
    return c.json(
      {
        id: client.id,
        apiKey: client.apiKey,
        appName: client.appName,
        contactEmail: client.contactEmail,
        createdAt: client.createdAt.toISOString(),
      },
      201,
    );
  } catch (error) {
    if (error instanceof AppNameTakenError) {
      throw new ApiError(409, `An app named "${error.appName}" is already registered`);
    }
    throw error;
  }
}
