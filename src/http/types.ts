import type { Queue } from "bullmq";
import type { Context } from "hono";
import type { Database } from "../../db/client.js";
import type { Config } from "../config.js";
import type { Logger } from "../logger.js";
import type { DeliveryJobData } from "../messages/delivery-queue.js";
import type { KeyOwner } from "../organizations/store.js";

/** Everything the web API needs from the outside; built by `server.ts`, or by tests. */
export interface AppDeps {
  config: Config;
  db: Database;
  queue: Queue<DeliveryJobData>;
  logger: Logger;
  now: () => Date;
  newId: () => string;
}

export type AppEnv = { Variables: { organization: KeyOwner; requestId: string } };
export type AppContext = Context<AppEnv>;

/** One endpoint: registered by `routes/index.ts` from a single list. */
export interface Route {
  method: "get" | "post";
  path: string;
  /** `api-key`: `x-api-key` of an active organization; `onboarding`: the onboarding token, when set. */
  auth: "api-key" | "onboarding";
  handler: (c: AppContext, deps: AppDeps) => Promise<Response>;
}
