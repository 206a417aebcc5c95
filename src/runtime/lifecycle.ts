import { ConfigError } from "./config.js";
import type { Logger } from "./logger.js";

/**
 * On SIGTERM or SIGINT, runs `close` once and exits; if it takes longer than `timeoutMs`
 * the process exits anyway, so a platform's hard kill never lands first.
 */
export function onShutdown(logger: Logger, timeoutMs: number, close: () => Promise<void>): void {
  let closing = false;
  const shutdown = (signal: string) => {
    if (closing) return;
    closing = true;
    logger.info({ signal }, "shutting down");
    const timer = setTimeout(() => {
      logger.error({ timeoutMs }, "shutdown timed out; exiting");
      process.exit(1);
    }, timeoutMs);
    timer.unref();
    close()
      .then(() => {
        logger.info("shut down cleanly");
        process.exit(0);
      })
      .catch((error: unknown) => {
        logger.error({ err: error }, "error during shutdown");
        process.exit(1);
      });
  };
  process.on("SIGTERM", () => shutdown("SIGTERM"));
  process.on("SIGINT", () => shutdown("SIGINT"));
}

/**
 * Runs a process's `main`; a configuration error prints its message (naming the variable) and
 * any other start-up failure prints the error, then the process exits with status 1.
 */
export function runProcess(main: () => void | Promise<void>): void {
  const fail = (error: unknown) => {
    console.error(error instanceof ConfigError ? error.message : error);
    process.exit(1);
  };
  try {
    Promise.resolve(main()).catch(fail);
  } catch (error) {
    fail(error);
  }
}
