import cluster from "node:cluster";
import { serve } from "@hono/node-server";
import type postgres from "postgres";
import { v7 as uuidv7 } from "uuid";
import { createDatabase, type Executor } from "../../db/client.js";
import { renderSandbox } from "../channels/email/templates/sandbox.js";
import { createVerifiedSenders, type VerifiedSenders } from "../messages/verified-senders.js";
import type { WebhookDeps } from "../messages/webhooks.js";
import { clusterWideMetrics } from "../observability/cluster-metrics.js";
import { createMetrics } from "../observability/metrics.js";
import { coalesceWrites } from "../runtime/coalesce-writes.js";
import type { Config } from "../runtime/config.js";
import { systemTxtResolver } from "../runtime/dns.js";
import { onShutdown } from "../runtime/lifecycle.js";
import type { Logger } from "../runtime/logger.js";
import { createOutboundAgent, outboundPost } from "../runtime/outbound/outbound-fetch.js";
import { unlistedTwilioAccountWarning } from "../runtime/provider-accounts.js";
import { createRedis } from "../runtime/redis.js";
import { webhookSecrets } from "../runtime/webhook-secrets.js";
import { createContentVault } from "../store/content.js";
import { DeliveryQueues } from "../store/delivery-queue.js";
import { createMessageStore, type MessageStore } from "../store/message-store.js";
import { type ReadReplica, ReplicaPause } from "../store/read-replica.js";
import { verifiedSenderKeys } from "../store/senders.js";
import { createApp } from "./app.js";
import { createOpsApp } from "./ops-app.js";

/** One process serving the notification API: opens its connections, serves, shuts down on SIGTERM. */
export function startApiProcess(config: Config, logger: Logger): void {
  // The web process verifies Twilio's status callbacks: an account dropped from every list no
  // longer verifies those of the messages it sent (docs/decisions/0046).
  const unlistedTwilio = unlistedTwilioAccountWarning(config);
  if (unlistedTwilio) logger.warn(unlistedTwilio);
  const { db, sql } = createDatabase({
    url: config.DATABASE_URL,
    poolSize: config.DATABASE_POOL_SIZE,
    statementTimeoutMs: config.DATABASE_STATEMENT_TIMEOUT_MS,
    connectTimeoutSeconds: 1.5, // a 503 within 2 s when Postgres is unreachable
  });
  const replica = readReplicaFor(config);
  const redis = createRedis(config.REDIS, "fail-fast", logger);
  // The per-request rate-limit command of concurrent requests leaves in one write.
  coalesceWrites(redis);
  // The API adds no jobs (the relay does); its queues serve the dashboard, metrics and readiness.
  const queues = DeliveryQueues.create(redis, config.QUEUE_PREFIX, config.QUEUE_SHARDS);
  queues.on("error", (error) => logger.warn({ err: error }, "queue error"));
  const queue = queues.first;

  renderSandbox.configure({
    threads: config.TEMPLATE_RENDER_THREADS,
    queuePerOrganization: config.TEMPLATE_RENDER_QUEUE_PER_ORGANIZATION,
  });
  const ownMetrics = createMetrics({ process: "web", queue: queues, db });
  // Under a supervisor, a scrape answers every API process's metrics, not only this one's.
  const metrics = cluster.isWorker ? clusterWideMetrics(ownMetrics) : ownMetrics;
  const store = messageStoreFor(config, sql, logger, replica);
  const now = () => new Date();
  const deps = {
    config,
    db,
    replica,
    store,
    queue,
    queues,
    logger,
    metrics,
    now,
    newId: uuidv7,
    senders: verifiedSendersFor(config, db, now),
    txtResolver: systemTxtResolver({ servers: config.DNS_SERVERS }),
    webhooks: webhookDepsFor(config, logger),
  };
  const servers = [
    serve({ fetch: createApp(deps).fetch, port: config.PORT }, (info) => {
      logger.info({ port: info.port }, `notification API listening on http://127.0.0.1:${info.port}`);
    }),
  ];
  if (config.OPS_PORT !== undefined) {
    const host = config.OPS_HOST;
    const ops = serve({ fetch: createOpsApp(deps).fetch, port: config.OPS_PORT, hostname: host }, (info) => {
      logger.info(
        { port: info.port, host },
        `operator endpoints (metrics, readiness, dashboard) on ${host}:${info.port}`,
      );
    });
    // Unlike the worker's, a taken operator port stops the process: the operator asked for it.
    servers.push(ops);
  }

  onShutdown(logger, config.SHUTDOWN_TIMEOUT_MS, async () => {
    await Promise.all(servers.map((server) => new Promise<void>((resolve) => server.close(() => resolve()))));
    // After the requests: a preview still rendering on the sandbox's thread finishes first.
    await renderSandbox.close();
    await queues.close();
    redis.disconnect();
    await Promise.all([sql.end({ timeout: 5 }), replica?.sql.end({ timeout: 5 })]);
  });
}

/**
 * The read replica of an API process (DATABASE_READ_URL), if one is named: listings, and records
 * and histories before the primary (src/store/read-replica.ts). Its client reconnects at a steady
 * pace, not with postgres.js's growing backoff: while it is down, reads go to the primary (they
 * pause it), and the one that tries it again learns at once whether it is back.
 */
export function readReplicaFor(
  config: Pick<Config, "DATABASE_READ_URL" | "DATABASE_POOL_SIZE" | "DATABASE_STATEMENT_TIMEOUT_MS">,
): ReadReplica | undefined {
  if (config.DATABASE_READ_URL === undefined) return undefined;
  return {
    ...createDatabase({
      url: config.DATABASE_READ_URL,
      poolSize: config.DATABASE_POOL_SIZE,
      statementTimeoutMs: config.DATABASE_STATEMENT_TIMEOUT_MS,
      connectTimeoutSeconds: 1.5,
      reconnectDelaySeconds: 0.1,
    }),
    pause: new ReplicaPause(),
  };
}

/**
 * The message store of an API process. While a statement stalls, at most `DATABASE_QUEUE_LIMIT`
 * requests wait for the next one (one more is refused at once, 503), and none is kept past the
 * request deadline, whose 503 has answered its client by then.
 */
export function messageStoreFor(
  config: Config,
  sql: postgres.Sql,
  logger?: Logger,
  replica?: ReadReplica,
): MessageStore {
  return createMessageStore({
    sql,
    replica,
    queuePrefix: config.QUEUE_PREFIX,
    limits: { maxWaiting: config.DATABASE_QUEUE_LIMIT, maxWaitMs: config.REQUEST_TIMEOUT_MS },
    content: createContentVault(sql, config, logger),
  });
}

/** The accept path's sender check of an API process, cached like its API keys. */
export function verifiedSendersFor(
  config: Pick<Config, "SENDER_VERIFICATION" | "AUTH_CACHE_TTL_MS">,
  db: Executor,
  now: () => Date,
): VerifiedSenders {
  return createVerifiedSenders({
    load: (organizationId) => verifiedSenderKeys(db, organizationId),
    now,
    ttlMs: config.AUTH_CACHE_TTL_MS,
    required: config.SENDER_VERIFICATION === "required",
  });
}

/**
 * What an API process's webhook routes need: the sealer of endpoints' secrets (warning when it is
 * the public development key) and a POST whose connections pass the outbound guard.
 */
export function webhookDepsFor(
  config: Pick<Config, "WEBHOOK_SECRET_KEY" | "WEBHOOK_ALLOWED_NETWORKS">,
  logger?: Pick<Logger, "warn">,
): Pick<WebhookDeps, "secrets" | "post"> {
  const secrets = webhookSecrets(config);
  if (secrets.development) {
    logger?.warn(
      "WEBHOOK_SECRET_KEY is unset: webhook signing secrets are sealed under the public development key, " +
        "which protects nothing (production refuses to start without one)",
    );
  }
  return {
    secrets,
    // Webhook URLs have networks of their own: OUTBOUND_ALLOWED_NETWORKS opens networks to push only.
    post: outboundPost(createOutboundAgent({ allowedNetworks: config.WEBHOOK_ALLOWED_NETWORKS })),
  };
}
