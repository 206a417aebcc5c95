import { configDefaults, defineConfig } from "vitest/config";

/**
 * Tests by tier. `unit`: pure code, no database, no network (`npm run test:unit`, seconds).
 * `integration`: the real Postgres and Redis, in-process apps and local servers playing the
 * providers. `e2e`: the Procfile's processes, built and run as written. The fault scenarios
 * (killed Redis and workers, cut Postgres; one at a time) run on their own: `npm run test:faults`.
 */
const withDatabase = {
  globalSetup: ["test/support/global-setup.ts"],
  testTimeout: 20_000,
  hookTimeout: 30_000,
  pool: "forks" as const,
};

export default defineConfig({
  test: {
    projects: [
      // Some unit tests hold a count to a reference library over every code point (seconds each).
      { test: { name: "unit", include: ["test/unit/**/*.test.ts"], pool: "forks", testTimeout: 30_000 } },
      { test: { name: "integration", include: ["test/integration/**/*.test.ts"], ...withDatabase } },
      {
        test: {
          name: "e2e",
          include: ["test/e2e/**/*.test.ts"],
          exclude: [...configDefaults.exclude],
          ...withDatabase,
        },
      },
    ],
  },
});
