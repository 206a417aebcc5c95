import { randomUUID } from "node:crypto";
import { serve } from "@hono/node-server";
import { Queue } from "bullmq";
import { Hono } from "hono";
import { Redis } from "ioredis";
import postgres from "postgres";

/**
 * The stack's ceiling for the accept path: the least a plain "insert, then enqueue" handler can
 * do per request on this machine with this stack (Hono on node-server, postgres.js, BullMQ). Per
 * request it parses the JSON body, INSERTs one `accepted` event row (autocommit, so one commit
 * per request) and adds one job the way `enqueueDelivery` does. No auth, no validation, no
 * projection row: anything the real accept path does beyond this is its own cost.
 */
const env = process.env;
const sql = postgres(env.DATABASE_URL ?? "", {
  max: Number(env.DATABASE_POOL_SIZE ?? 10),
  onnotice: () => {},
});
const redis = new Redis(env.REDIS_URL ?? "redis://127.0.0.1:6379", {
  enableOfflineQueue: false,
  maxRetriesPerRequest: 1,
});
const queue = new Queue("deliveries", { connection: redis, prefix: env.QUEUE_PREFIX ?? "ceiling" });
queue.on("error", () => {});

const app = new Hono();
app.get("/healthz", (c) => c.json({ status: "ok" }));
app.post("/api/v1/notifications/sms", async (c) => {
  const request = (await c.req.json()) as { payload: { to: string; body: string; sender?: string } };
  const id = randomUUID();
  const now = new Date();
  const data = {
    id,
    organizationId: id,
    productId: "bench",
    channel: "sms",
    priority: "medium",
    notificationType: null,
    retryEnabled: true,
    recipient: request.payload.to,
    sender: request.payload.sender ?? "Notify",
    body: request.payload.body,
    expiresAt: new Date(now.getTime() + 86_400_000).toISOString(),
  };
  await sql`
    insert into message_events (message_id, organization_id, seq, type, retry_count, data, occurred_at)
    values (${id}, ${id}, 1, 'accepted', 0, ${sql.json(data)}, ${now})`;
  await queue.add(
    "deliver",
    { messageId: id },
    {
      jobId: id,
      priority: 3,
      attempts: 20,
      backoff: { type: "exponential", delay: 1000 },
      removeOnComplete: true,
      removeOnFail: true,
    },
  );
  return c.json({ message: "SMS notification accepted", request_id: id }, 202);
});

const server = serve({ fetch: app.fetch, port: Number(env.PORT ?? 3000) });
process.on("SIGTERM", () => {
  server.close();
  void queue.close().finally(() => {
    redis.disconnect();
    void sql.end({ timeout: 2 }).finally(() => process.exit(0));
  });
});
