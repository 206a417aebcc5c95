import type { RouteConfig } from "@hono/zod-openapi";
import type { Queue } from "bullmq";
import type { Context } from "hono";
import type { z } from "zod";
import type { Database } from "../../db/client.js";
import type { VerifiedSenders } from "../messages/verified-senders.js";
import type { WebhookDeps } from "../messages/webhooks.js";
import type { Metrics } from "../observability/metrics.js";
import type { Config } from "../runtime/config.js";
import type { TxtResolver } from "../runtime/dns.js";
import type { Logger } from "../runtime/logger.js";
import type { DeliveryJobData, DeliveryQueues } from "../store/delivery-queue.js";
import type { MessageStore } from "../store/message-store.js";
import type { KeyOwner } from "../store/organizations.js";
import type { ReadReplica } from "../store/read-replica.js";
import type { SendLimits } from "./middleware/send-limits.js";

/** Everything the web API needs from the outside; built by `api-process.ts`, or by tests. */
export interface AppDeps {
  config: Config;
  db: Database;
  /**
   * A read replica (DATABASE_READ_URL) for listings, which may lag behind `db`; the store's
   * reads of one message use it too, with the primary on a miss (src/store/read-replica.ts).
   */
  replica?: ReadReplica;
  /** Messages' events and records, with the batches every request shares. */
  store: MessageStore;
  /** The delivery queue's shard 0: its connection serves the limits and readiness. */
  queue: Queue<DeliveryJobData>;
  /** Every shard (`QUEUE_SHARDS`), for the dashboard; unset: `queue` alone. */
  queues?: DeliveryQueues;
  logger: Logger;
  now: () => Date;
  newId: () => string;
  metrics: Metrics;
  /** The accept path's check of senders, with its cache (one per process). */
  senders: VerifiedSenders;
  /** Where a domain's verification record is looked up. */
  txtResolver: TxtResolver;
  /** What status webhooks need: the sealer of their secrets and a `fetch` through the outbound guard. */
  webhooks: Pick<WebhookDeps, "secrets" | "post">;
}

export type AppEnv = {
  Variables: {
    organization: KeyOwner;
    requestId: string;
    /** Set when a send's handler accepted a new message (what the daily quota counts). */
    messageAccepted?: boolean;
    /** A batch send's limits, which its handler takes per item (`rateLimit: "send-items"`). */
    sendLimits?: SendLimits;
  };
};
export type AppContext = Context<AppEnv>;

/** One endpoint: registered by `routes/index.ts` from a single list. */
export interface Route<R extends RouteConfig = RouteConfig> {
  /**
   * The endpoint as the OpenAPI document shows it (`createRoute`): method, path, parameters, body
   * and every response. Its parameter schemas validate requests before the handler runs.
   */
  definition: R;
  /** `api-key`: `x-api-key` of an active organization; `onboarding`: the onboarding token, when set. */
  auth: "api-key" | "onboarding";
  /**
   * Limits checked right after authentication, per organization: `send`, the send rate and the
   * daily quota; `send-items`, the same, taken by the handler for each item of a batch; `preview`, the template preview rate; `sender-verify`, the domain checks' rate;
   * `webhook-test`, the webhook test events' rate; `webhook-recover`, the webhook recoveries' rate.
   */
  rateLimit?: "send" | "send-items" | "preview" | "sender-verify" | "webhook-test" | "webhook-recover";
  /** Largest request body, checked before authentication; default `MAX_BODY_BYTES` (64 KiB). */
  maxBodyBytes?: number;
  handler(c: RouteContext<R>, deps: AppDeps): Promise<Response>;
}

type Validated<S> = S extends z.ZodType ? z.output<S> : never;
type RequestParts<R extends RouteConfig> = NonNullable<R["request"]>;

/** A handler's context: `c.req.valid("param" | "query" | "header")` gives the validated values. */
export type RouteContext<R extends RouteConfig> = Context<
  AppEnv,
  string,
  {
    out: {
      param: Validated<RequestParts<R>["params"]>;
      query: Validated<RequestParts<R>["query"]>;
      header: Validated<RequestParts<R>["headers"]>;
    };
  }
>;

/** Types a route's handler from its definition. */
export function defineRoute<R extends RouteConfig>(route: Route<R>): Route<R> {
  return route;
}
