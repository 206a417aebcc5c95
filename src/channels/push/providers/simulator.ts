import type { DeliveryOutcome } from "../../../domain/delivery-outcome.js";
import {
  type SimulatedCase,
  type SimulatorOptions,
  simulatedDigest,
  simulatedOutcome,
} from "../../providers/simulator.js";
import type { PushMessage, PushProvider } from "./provider.js";

/** The origin of the simulator's special endpoints; nothing is ever sent there. */
export const SIMULATOR_PUSH_ORIGIN = "https://push.simulator.notify.test";

/** How the simulator treats one special endpoint. */
export type SimulatedPushEndpoint = SimulatedCase;

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
} as const satisfies Record<string, SimulatedPushEndpoint>;

export type SimulatorPushOutcome = keyof typeof SIMULATOR_PUSH_ENDPOINTS;

const endpoints: Readonly<Record<string, SimulatedPushEndpoint | undefined>> = SIMULATOR_PUSH_ENDPOINTS;

/** The endpoint that produces `outcome`; `suffix` (e.g. a test's name) makes it unique. */
export function simulatorPushEndpoint(outcome: SimulatorPushOutcome, suffix?: string): string {
  return `${SIMULATOR_PUSH_ORIGIN}/${outcome}${suffix ? `/${encodeURIComponent(suffix)}` : ""}`;
}

export type SimulatorPushProviderOptions = SimulatorOptions;

/**
 * A deterministic sandbox standing in for real push services: the outcome depends only on the
 * subscription's endpoint and the attempt number (see {@link SIMULATOR_PUSH_ENDPOINTS}), and
 * nothing is sent or encrypted.
 */
export class SimulatorPushProvider implements PushProvider {
  readonly name = "simulator";
  readonly #rateLimitRetryAfterMs: number;

  constructor(options: SimulatorPushProviderOptions = {}) {
    this.#rateLimitRetryAfterMs = options.rateLimitRetryAfterMs ?? 1000;
  }

  async send(message: PushMessage): Promise<DeliveryOutcome> {
    const special = specialEndpoint(message.subscription.endpoint);
    return simulatedOutcome({
      provider: this.name,
      special: special && { case: special },
      attempt: message.attempt,
      rateLimitRetryAfterMs: this.#rateLimitRetryAfterMs,
      // Shaped like the Location a push service returns.
      successId: `${SIMULATOR_PUSH_ORIGIN}/messages/${simulatedDigest(message.messageId, message.attempt)}`,
    });
  }
}

function specialEndpoint(endpoint: string): SimulatedPushEndpoint | undefined {
  let url: URL;
  try {
    url = new URL(endpoint);
  } catch {
    return undefined;
  }
  if (url.origin !== SIMULATOR_PUSH_ORIGIN) return undefined;
  const outcome = url.pathname.split("/")[1] ?? "";
  return Object.hasOwn(endpoints, outcome) ? endpoints[outcome] : undefined;
}
