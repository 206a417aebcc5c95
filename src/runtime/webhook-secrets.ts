import { createHash, randomBytes } from "node:crypto";
import { open, parseMasterKey, seal } from "./content-crypto.js";

/**
 * The signing secrets of status webhook endpoints (docs/decisions/0035): made here, shown once,
 * stored sealed with AES-256-GCM under `WEBHOOK_SECRET_KEY` (the helpers of content-crypto.ts),
 * each bound to its endpoint's id so a sealed secret copied to another row does not open.
 */

/** The prefix of a secret as Standard Webhooks writes it: `whsec_` + base64 of the key bytes. */
export const SECRET_PREFIX = "whsec_";

/** A new secret: `whsec_` + base64 of 32 random bytes (the standard allows 24 to 64). */
export function newWebhookSecret(): string {
  return `${SECRET_PREFIX}${randomBytes(32).toString("base64")}`;
}

/** The key development and test runs use when `WEBHOOK_SECRET_KEY` is unset: fixed and public. */
export const DEVELOPMENT_WEBHOOK_SECRET_KEY = createHash("sha256")
  .update("notification-service development webhook secret key (not secret)")
  .digest();

export interface WebhookSecrets {
  seal(endpointId: string, secret: string): Buffer;
  open(endpointId: string, sealed: Buffer): string;
  /** True when sealing under the public development key (the caller warns). */
  readonly development: boolean;
}

const aad = (endpointId: string) => Buffer.from(`webhook endpoint secret ${endpointId}`);

/** The sealer `WEBHOOK_SECRET_KEY` describes; without one (refused in production), the public development key. */
export function webhookSecrets(config: { WEBHOOK_SECRET_KEY?: string }): WebhookSecrets {
  const configured = config.WEBHOOK_SECRET_KEY ? parseMasterKey(config.WEBHOOK_SECRET_KEY) : undefined;
  const key = configured ?? DEVELOPMENT_WEBHOOK_SECRET_KEY;
  return {
    development: configured === undefined,
    seal: (endpointId, secret) => seal(key, Buffer.from(secret), aad(endpointId)),
    open: (endpointId, sealed) => open(key, sealed, aad(endpointId)).toString(),
  };
}
