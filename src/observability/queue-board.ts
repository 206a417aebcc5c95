import { createBullBoard } from "@bull-board/api";
import { BullMQAdapter } from "@bull-board/api/bullMQAdapter";
import { HonoAdapter } from "@bull-board/hono";
import { serveStatic } from "@hono/node-server/serve-static";
import type { Queue } from "bullmq";
import { Hono } from "hono";
import { basicAuth } from "hono/basic-auth";
import { secretsEqual } from "../runtime/api-keys.js";

/** Bull Board over every queue, behind basic auth, for mounting at `basePath`. */
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
  app.use(
    "*",
    basicAuth({
      verifyUser: (user, password) =>
        secretsEqual(user, options.user) && secretsEqual(password, options.password),
      realm: "queues",
    }),
  );
  app.route("/", adapter.registerPlugin());
  return app;
}
