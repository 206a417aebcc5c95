import { serve } from "@hono/node-server";
import { createDatabase } from "../../db/client.js";
import { clientIpResolver } from "../http/client-ip.js";
import { onShutdown, runProcess } from "../runtime/lifecycle.js";
import { createLogger } from "../runtime/logger.js";
import { createClientOnboardingApp } from "./app.js";
import { loadClientOnboardingConfig } from "./config.js";

function main(): void {
  const config = loadClientOnboardingConfig();
  const logger = createLogger({ level: config.LOG_LEVEL, name: "client-onboarding" });
  const { db, sql } = createDatabase({
    url: config.DATABASE_URL,
    poolSize: config.DATABASE_POOL_SIZE,
    statementTimeoutMs: config.DATABASE_STATEMENT_TIMEOUT_MS,
    connectTimeoutSeconds: 2,
  });

  const app = createClientOnboardingApp({
    config,
    db,
    logger,
    now: () => new Date(),
    clientIp: clientIpResolver(config.TRUST_PROXY),
  });
  const server = serve({ fetch: app.fetch, port: config.PORT }, (info) => {
    logger.info({ port: info.port }, `client-onboarding service listening on http://127.0.0.1:${info.port}`);
  });

  onShutdown(logger, config.SHUTDOWN_TIMEOUT_MS, async () => {
    await new Promise<void>((resolve) => server.close(() => resolve()));
    await sql.end({ timeout: 5 });
  });
}

runProcess(main);
