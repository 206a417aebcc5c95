import { fileURLToPath } from "node:url";
import { defineConfig } from "vitest/config";

/**
 * `npm run test:faults`: the fault scenarios (real processes, cut networks, killed Redis and
 * workers). The fuzzing, rate-limit and key tests beside them run in `npm test`. One file at a time: the scenarios time
 * responses and kill processes, and a 2-core machine running two at once gives noisy numbers.
 */
export default defineConfig({
  root: fileURLToPath(new URL("../..", import.meta.url)),
  test: {
    include: ["test/faults/scenarios/**/*.test.ts"],
    globalSetup: ["test/support/global-setup.ts"],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    pool: "forks",
    fileParallelism: false,
  },
});
