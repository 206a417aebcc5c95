import { createDatabase } from "../../db/client.js";
import { onShutdown, runProcess } from "../runtime/lifecycle.js";
import { createLogger } from "../runtime/logger.js";
import { loadBouncesConfig, loadBouncesTls } from "./config.js";
import { createBounceIntake } from "./intake.js";

/**
 * The `bounces` process (Procfile): the SMTP listener that takes DSNs and abuse reports sent to
 * the e-mails' return paths at `BOUNCE_DOMAIN` (src/bounces/intake.ts, docs/decisions/0040). It
 * needs only Postgres and its own settings (src/bounces/config.ts): no Redis, no provider, no
 * master key (a receipt reads no sealed content).
 */
async function main(): Promise<void> {
  const config = loadBouncesConfig();
  const tls = loadBouncesTls(config);
  const logger = createLogger({ level: config.LOG_LEVEL, name: "bounces" });
  const { sql } = createDatabase({
    url: config.DATABASE_URL,
    poolSize: 5,
    statementTimeoutMs: config.DATABASE_STATEMENT_TIMEOUT_MS,
    connectTimeoutSeconds: 2,
  });
  const intake = createBounceIntake({
    sql,
    logger,
    returnPath: { domain: config.BOUNCE_DOMAIN, localPart: config.BOUNCE_LOCAL_PART },
    maxClients: config.BOUNCES_MAX_CLIENTS,
    maxConnectionsPerIp: config.BOUNCES_MAX_CONNECTIONS_PER_IP,
    feedbackAddress: config.BOUNCES_FEEDBACK_ADDRESS,
    tls,
  });
  const port = await intake.listen(config.BOUNCES_PORT, config.BOUNCES_HOST);
  logger.info(
    { port, host: config.BOUNCES_HOST, domain: config.BOUNCE_DOMAIN, starttls: tls !== undefined },
    `bounces SMTP listener on ${config.BOUNCES_HOST}:${port}`,
  );
  onShutdown(logger, config.SHUTDOWN_TIMEOUT_MS, async () => {
    await intake.close();
    await sql.end({ timeout: 5 });
  });
}

runProcess(main);
