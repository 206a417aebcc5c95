import { type SimulatedCase, type TableSimulator, tableSimulator } from "../../providers/simulator.js";
import type { PushMessage } from "./provider.js";

/** The origin of the simulator's special endpoints; nothing is ever sent there. */
export const SIMULATOR_PUSH_ORIGIN = "https://push.simulator.notify.test";

/**
 * The simulator's special endpoints, keyed by the first path segment under
 * {@link SIMULATOR_PUSH_ORIGIN} (anything after it is ignored, so each test can use its own
 * endpoint). Any other endpoint succeeds on the first attempt.
 */
export const SIMULATOR_PUSH_ENDPOINTS = {
  gone: {
    description: "rejected: subscription expired or unsubscribed (as a 410)",
    class: "rejected",
    code: "subscription_gone",
    failingAttempts: Number.POSITIVE_INFINITY,
  },
  transient: {
    description: "transient failure on every attempt",
    class: "transient",
    code: "simulated_outage",
    failingAttempts: Number.POSITIVE_INFINITY,
  },
  "transient-once": {
    description: "transient failure on the first attempt, then success",
    class: "transient",
    code: "simulated_outage",
    failingAttempts: 1,
  },
  "transient-twice": {
    description: "transient failure on the first two attempts, then success",
    class: "transient",
    code: "simulated_outage",
    failingAttempts: 2,
  },
  "rate-limited": {
    description: "push service rate limit (429) on the first attempt, then success",
    class: "transient",
    code: "rate_limited",
    failingAttempts: 1,
    rateLimited: true,
  },
  failed: {
    description: "permanent failure on every attempt (as a 400/403: bad VAPID or request)",
    class: "permanent",
    code: "simulated_failure",
    failingAttempts: Number.POSITIVE_INFINITY,
  },
} as const satisfies Record<string, SimulatedCase>;

export type SimulatorPushOutcome = keyof typeof SIMULATOR_PUSH_ENDPOINTS;

/** The endpoint that produces `outcome`; `suffix` (e.g. a test's name) makes it unique. */
export function simulatorPushEndpoint(outcome: SimulatorPushOutcome, suffix?: string): string {
  return `${SIMULATOR_PUSH_ORIGIN}/${outcome}${suffix ? `/${encodeURIComponent(suffix)}` : ""}`;
}

/**
 * A deterministic sandbox standing in for real push services: the outcome depends only on the
 * subscription's endpoint and the attempt number (see {@link SIMULATOR_PUSH_ENDPOINTS}), and
 * nothing is sent or encrypted.
 */
export const SimulatorPushProvider = tableSimulator<PushMessage>({
  cases: SIMULATOR_PUSH_ENDPOINTS,
  recipients: (message) => specialEndpoint(message.subscription.endpoint),
  // Shaped like the Location a push service returns.
  successId: (digest) => `${SIMULATOR_PUSH_ORIGIN}/messages/${digest}`,
});
export type SimulatorPushProvider = TableSimulator<PushMessage>;

/** The endpoint's outcome name (its first path segment) when it is at the simulator's origin. */
function specialEndpoint(endpoint: string): string[] {
  let url: URL;
  try {
    url = new URL(endpoint);
  } catch {
    return [];
  }
  if (url.origin !== SIMULATOR_PUSH_ORIGIN) return [];
  return [url.pathname.split("/")[1] ?? ""];
}
