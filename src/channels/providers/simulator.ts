import { createHash } from "node:crypto";
import type { DeliveryOutcome, FailureClass } from "../../domain/delivery-outcome.js";
import type { Provider, ProviderMessage } from "./provider.js";

/**
 * What every channel's simulator is: a table of special recipients (numbers, addresses,
 * endpoints), each failing in a documented way on its first attempts, and a stable fake id for
 * everything else. Deterministic, so integrators and tests can exercise every outcome; nothing is
 * ever sent.
 */

/** How a simulator treats one special recipient. */
export interface SimulatedCase {
  /** One line for docs and test names, e.g. "rejected: invalid number". */
  description: string;
  class: FailureClass;
  code: string;
  /** Attempts 1..failingAttempts fail; later ones succeed. `Infinity` never succeeds. */
  failingAttempts: number;
  /** The failure carries the simulator's `rateLimitRetryAfterMs`, like an HTTP 429. */
  rateLimited?: boolean;
}

export interface SimulatorOptions {
  /** Retry-After reported by rate-limited cases; default 1000. */
  rateLimitRetryAfterMs?: number;
  /** Its name in outcomes and the history: `simulator` (default), or a provider list's `simulator:b`. */
  name?: string;
}

/** What a channel gives to have a simulator: its table, and how to read a message against it. */
export interface SimulatorTable<M extends ProviderMessage> {
  /** The special recipients, keyed as {@link recipients} spells them. */
  cases: Readonly<Record<string, SimulatedCase>>;
  /** The message's recipients as the table's keys spell them; the first special one decides. */
  recipients(message: M): readonly string[];
  /** The provider's id for a success, around 32 hex characters stable for the message and attempt. */
  successId(digest: string): string;
}

/**
 * A deterministic sandbox standing in for a real provider: the outcome depends only on the
 * message's recipients and the attempt number.
 */
export class TableSimulator<M extends ProviderMessage> implements Provider<M> {
  readonly name: string;
  readonly #table: SimulatorTable<M>;
  readonly #cases: ReadonlyMap<string, SimulatedCase>;
  readonly #rateLimitRetryAfterMs: number;

  constructor(table: SimulatorTable<M>, options: SimulatorOptions = {}) {
    this.name = options.name ?? "simulator";
    this.#table = table;
    this.#cases = new Map(Object.entries(table.cases));
    this.#rateLimitRetryAfterMs = options.rateLimitRetryAfterMs ?? 1000;
  }

  async send(message: M): Promise<DeliveryOutcome> {
    const { attempt } = message;
    for (const recipient of this.#table.recipients(message)) {
      const special = this.#cases.get(recipient);
      if (!special) continue;
      if (attempt > special.failingAttempts) break;
      return {
        ok: false,
        provider: this.name,
        error: {
          class: special.class,
          code: special.code,
          // Never the recipient: tenants read the message in the history, which never holds it.
          message: `Simulator: ${special.description} (attempt ${attempt})`,
          ...(special.rateLimited ? { retryAfterMs: this.#rateLimitRetryAfterMs } : {}),
        },
      };
    }
    const digest = createHash("sha256").update(`${message.messageId}:${attempt}`).digest("hex").slice(0, 32);
    return { ok: true, provider: this.name, providerMessageId: this.#table.successId(digest) };
  }
}

/** The provider class of one channel's simulator, built from its table. */
export function tableSimulator<M extends ProviderMessage>(
  table: SimulatorTable<M>,
): new (
  options?: SimulatorOptions,
) => TableSimulator<M> {
  return class extends TableSimulator<M> {
    constructor(options: SimulatorOptions = {}) {
      super(table, options);
    }
  };
}
