import { createBullBoard } from "@bull-board/api";
import { BullMQAdapter } from "@bull-board/api/bullMQAdapter";
import { HonoAdapter } from "@bull-board/hono";
import { serveStatic } from "@hono/node-server/serve-static";
import type { Queue } from "bullmq";
import { type Context, Hono } from "hono";
import { basicAuth } from "hono/basic-auth";
import { incomingOf } from "../http/node-request.js";
import { secretsEqual } from "../runtime/api-keys.js";

/** Failed logins one client may make in a window; past it every login of that client is refused. */
const MAX_FAILED_LOGINS = 10;
const FAILED_LOGIN_WINDOW_MS = 60_000;

/**
 * Bull Board over every queue, behind basic auth, for mounting at `basePath`. A client that gets
 * the password wrong {@link MAX_FAILED_LOGINS} times in a minute is refused (429) until the minute
 * is over, right password or not, so the password cannot be guessed at network speed.
 */
export function queueBoard(options: {
  basePath: string;
  queues: Queue[];
  user: string;
  password: string;
}): Hono {
  const adapter = new HonoAdapter(serveStatic).setBasePath(options.basePath);
  createBullBoard({
    queues: options.queues.map((queue) => new BullMQAdapter(queue)),
    serverAdapter: adapter,
  });
  const app = new Hono();
  const failures = new Map<string, { count: number; resetAt: number }>();
  const clientOf = (c: Context) => incomingOf(c)?.socket.remoteAddress ?? "unknown";
  app.use("*", async function throttleFailedLogins(c, next) {
    const failed = failures.get(clientOf(c));
    const now = Date.now();
    if (failed && failed.resetAt > now && failed.count >= MAX_FAILED_LOGINS) {
      const seconds = Math.ceil((failed.resetAt - now) / 1000);
      return c.json({ error: `Too many failed logins; retry after ${seconds} s` }, 429, {
        "Retry-After": String(seconds),
      });
    }
    await next();
  });
  app.use(
    "*",
    basicAuth({
      verifyUser: (user, password, c) => {
        const valid = secretsEqual(user, options.user) && secretsEqual(password, options.password);
        if (!valid) recordFailure(failures, clientOf(c));
        return valid;
      },
      realm: "queues",
    }),
  );
  app.route("/", adapter.registerPlugin());
  return app;
}

function recordFailure(failures: Map<string, { count: number; resetAt: number }>, client: string): void {
  const now = Date.now();
  if (failures.size > 10_000) {
    for (const [key, entry] of failures) if (entry.resetAt <= now) failures.delete(key);
  }
  const entry = failures.get(client);
  if (!entry || entry.resetAt <= now)
    failures.set(client, { count: 1, resetAt: now + FAILED_LOGIN_WINDOW_MS });
  else entry.count++;
}
