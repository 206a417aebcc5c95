import type { Context } from "hono";
import type { Database } from "../../db/client.js";
import type { Logger } from "../runtime/logger.js";
import type { EncryptionConfig } from "./config.js";

export type EncryptionEnv = { Variables: { requestId: string } };
export type EncryptionContext = Context<EncryptionEnv>;

/** Everything the onboarding service needs from the outside; built by `server.ts`, or by tests. */
export interface EncryptionDeps {
  config: EncryptionConfig;
  db: Database;
  logger: Logger;
  now: () => Date;
  /** The address requests are rate-limited by (see `client-ip.ts`). */
  clientIp: (c: EncryptionContext) => string;
}
