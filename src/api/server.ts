import cluster from "node:cluster";
import { assertWebConfig, type Config, loadConfig } from "../runtime/config.js";
import { runProcess } from "../runtime/lifecycle.js";
import { createLogger, type Logger } from "../runtime/logger.js";
import { assertUsableRedis } from "../runtime/redis-checks.js";

/** A process that keeps dying is not restarted more often than this. */
const RESTART_DELAY_MS = 1000;

/**
 * The web entry point. With `WEB_CONCURRENCY` = 1 (the default) this process serves the API
 * itself; with N > 1 it is a small supervisor that runs N API processes (node:cluster, sharing
 * the port, and `OPS_PORT` when set), restarts one that dies, and on SIGTERM passes the signal on
 * and exits once they have all shut down. It also gathers their metrics when one of them is
 * scraped (src/observability/cluster-metrics.ts). The supervisor never loads the app, so it costs
 * little memory.
 */
async function main(): Promise<void> {
  const config = loadConfig();
  assertWebConfig(config);
  // Once per dyno: the supervisor's API processes (and their restarts) share its answer.
  if (cluster.isPrimary) {
    await assertUsableRedis(config.REDIS, createLogger({ level: config.LOG_LEVEL, name: "web" }));
  }
  if (cluster.isPrimary && config.WEB_CONCURRENCY > 1) {
    const { answerClusterMetricsRequests } = await import("../observability/cluster-metrics.js");
    answerClusterMetricsRequests();
    supervise(config, createLogger({ level: config.LOG_LEVEL, name: "web-supervisor" }));
    return;
  }
  const { startApiProcess } = await import("./api-process.js");
  startApiProcess(config, createLogger({ level: config.LOG_LEVEL, name: "web" }));
}

function supervise(config: Config, logger: Logger): void {
  let stopping = false;
  // A restart still waiting when SIGTERM comes is called off: that process would never hear it.
  const fork = () => {
    if (!stopping) cluster.fork();
  };
  const exitOnceAllExited = () => {
    if (Object.keys(cluster.workers ?? {}).length > 0) return;
    logger.info("every API process has exited");
    process.exit(0);
  };
  cluster.on("exit", (worker, code, signal) => {
    if (stopping) {
      exitOnceAllExited();
      return;
    }
    logger.error({ pid: worker.process.pid, code, signal }, "an API process died; starting another");
    setTimeout(fork, RESTART_DELAY_MS);
  });
  for (let i = 0; i < config.WEB_CONCURRENCY; i++) fork();
  logger.info({ processes: config.WEB_CONCURRENCY }, "web supervisor started");

  const stop = (signal: NodeJS.Signals) => {
    if (stopping) return;
    stopping = true;
    logger.info({ signal }, "shutting down the API processes");
    for (const worker of Object.values(cluster.workers ?? {})) worker?.process.kill(signal);
    exitOnceAllExited(); // the only one had died and was waiting for its restart
    // Each API process keeps to SHUTDOWN_TIMEOUT_MS itself; this only guards against a stuck one.
    setTimeout(() => {
      logger.error("API processes did not exit in time");
      process.exit(1);
    }, config.SHUTDOWN_TIMEOUT_MS + 2000).unref();
  };
  process.on("SIGTERM", () => stop("SIGTERM"));
  process.on("SIGINT", () => stop("SIGINT"));
}

runProcess(main);
