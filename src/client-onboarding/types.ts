import type { Context } from "hono";
import type { Database } from "../../db/client.js";
import type { Logger } from "../runtime/logger.js";
import type { ClientOnboardingConfig } from "./config.js";

export type ClientOnboardingEnv = { Variables: { requestId: string } };
export type ClientOnboardingContext = Context<ClientOnboardingEnv>;

/** Everything the onboarding service needs from the outside; built by `server.ts`, or by tests. */
export interface ClientOnboardingDeps {
  config: ClientOnboardingConfig;
  db: Database;
  logger: Logger;
  now: () => Date;
  /** The client's address (see `src/http/client-ip.ts`); its IPv6 /64 is what requests are rate-limited by. */
  clientIp: (c: ClientOnboardingContext) => string;
}
