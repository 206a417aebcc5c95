import { createBullBoard } from "@bull-board/api";
import { BullMQAdapter } from "@bull-board/api/bullMQAdapter";
import { HonoAdapter } from "@bull-board/hono";
import { serveStatic } from "@hono/node-server/serve-static";
import type { Queue } from "bullmq";
import { type Context, Hono } from "hono";
import { basicAuth } from "hono/basic-auth";
import { RateLimiterMemory, RateLimiterRes } from "rate-limiter-flexible";
import { ApiError } from "../http/errors.js";
import { secretsEqual } from "../runtime/api-keys.js";

/** Failed logins one client may make in a window; past it every login of that client is refused. */
export const MAX_FAILED_LOGINS = 10;
const FAILED_LOGIN_WINDOW_SECONDS = 60;

/**
 * Bull Board over every queue, behind basic auth, for mounting at `basePath`. A client that gets
 * the credentials wrong {@link MAX_FAILED_LOGINS} times in a minute is refused (429 with
 * `Retry-After`) until that minute is over, right password or not, so the password cannot be
 * guessed at network speed. Clients are told apart by `clientKey`: their address as the client-IP
 * resolver finds it (behind a trusted proxy, not the proxy's own), so one client cannot lock
 * another out. The counters are this process's (see decision 0031).
 */
export function queueBoard(options: {
  basePath: string;
  queues: Queue[];
  user: string;
  password: string;
  clientKey: (c: Context) => string;
}): Hono {
  const adapter = new HonoAdapter(serveStatic).setBasePath(options.basePath);
  createBullBoard({
    queues: options.queues.map((queue) => new BullMQAdapter(queue)),
    serverAdapter: adapter,
  });
  const failedLogins = new RateLimiterMemory({
    points: MAX_FAILED_LOGINS,
    duration: FAILED_LOGIN_WINDOW_SECONDS,
  });
  const app = new Hono();
  app.use("*", async function refuseClientsThatGuess(c, next) {
    const failed = await failedLogins.get(options.clientKey(c));
    if (failed && failed.consumedPoints >= MAX_FAILED_LOGINS) {
      const seconds = Math.max(1, Math.ceil(failed.msBeforeNext / 1000));
      throw new ApiError(429, `Too many failed logins; retry in ${seconds} s`, {
        "Retry-After": String(seconds),
      });
    }
    await next();
  });
  app.use(
    "*",
    basicAuth({
      verifyUser: async (user, password, c) => {
        // Both compared every time (each in constant time), so the time taken tells nothing.
        const userMatches = secretsEqual(user, options.user);
        const passwordMatches = secretsEqual(password, options.password);
        if (userMatches && passwordMatches) return true;
        // Past the limit it rejects; the check above refuses the client's next login.
        await failedLogins.consume(options.clientKey(c)).catch((rejection: unknown) => {
          if (!(rejection instanceof RateLimiterRes)) throw rejection;
        });
        return false;
      },
      realm: "queues",
    }),
  );
  app.route("/", adapter.registerPlugin());
  return app;
}
