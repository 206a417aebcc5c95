import { configDefaults, defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    // The fault scenarios (real processes, killed Redis and workers, cut Postgres; ~90 s, one
    // at a time) run on their own: `npm run test:faults`.
    exclude: [...configDefaults.exclude, "test/faults/scenarios/**"],
    globalSetup: ["test/support/global-setup.ts"],
    testTimeout: 20_000,
    hookTimeout: 30_000,
    pool: "forks",
  },
});
