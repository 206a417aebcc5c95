/**
 * Per-organization limits far above what any test sends, for the harnesses and the processes the
 * tests start: the defaults (100 sends a second, 100,000 a day, 10 previews a second) would refuse
 * the floods of the fault and end-to-end tests. The limits stay on, so their code runs everywhere;
 * the tests of the limits set their own.
 */
export const GENEROUS_LIMITS = {
  SEND_RATE_LIMIT: "1000000",
  SEND_DAILY_QUOTA: "1000000000",
  TEMPLATE_PREVIEW_RATE_LIMIT: "1000000",
} as const;
