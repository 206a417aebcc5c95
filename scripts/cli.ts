import { configSchema } from "../src/runtime/config.js";

/** Wrong arguments: the usage is printed, exit code 2. */
export class UsageError extends Error {}
/** The command cannot do what was asked (no such key, sender…): its message, exit code 1. */
export class Refused extends Error {}

/**
 * Runs an operator command against `DATABASE_URL` with the process's arguments, and turns its
 * failures into a message and an exit code.
 */
export function runCommand(
  name: string,
  usage: string,
  run: (args: string[], databaseUrl: string) => Promise<void>,
): void {
  const { DATABASE_URL } = configSchema.pick({ DATABASE_URL: true }).parse(process.env);
  run(process.argv.slice(2), DATABASE_URL).catch((error: unknown) => {
    if (error instanceof UsageError) {
      console.error(`${error.message}\n${usage}`);
      process.exitCode = 2;
    } else if (error instanceof Refused) {
      console.error(error.message);
      process.exitCode = 1;
    } else {
      // A database error's own message, not drizzle's wrapper (which repeats the query and its parameters).
      const cause = error instanceof Error && error.cause instanceof Error ? error.cause : error;
      console.error(`${name}: failed:`, cause instanceof Error ? cause.message : cause);
      process.exitCode = 1;
    }
  });
}
