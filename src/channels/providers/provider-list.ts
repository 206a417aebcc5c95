import type { DeliveryOutcome, ProviderFailover } from "../../domain/delivery-outcome.js";
import { NO_PROVIDER } from "../../domain/events.js";
import { type BreakerPermit, type BreakerState, type CallResult, CircuitBreaker } from "./breaker.js";
import type {
  BreakerReading,
  Provider,
  ProviderMessage,
  ProviderReservation,
  SendOptions,
} from "./provider.js";

/**
 * A channel's providers in order (`SMS_PROVIDERS=twilio:primary,twilio:backup`), each account
 * behind a circuit breaker of its own, as one {@link Provider} (docs/decisions/0046).
 *
 * One attempt goes to the first provider whose breaker lets it through (the providers the
 * previous attempt failed on last). It moves on to the next provider only when the answer proves
 * the message was not taken and another account may take it: a transient error marked `notTaken`
 * (a refused connection, no such host, a 429; never a 503, which an edge may answer after the
 * provider took it), or a refusal of the account rather than the recipient (`accountRefusal`:
 * credentials, an account not active, a sender not this account's). Anything else ends the attempt
 * with that provider's outcome: a success, a rejected recipient or another permanent error (never
 * moved: another provider would refuse the same recipient, or the error is ours), and a transient
 * failure that may have been taken (a time-out after the request left, a connection reset, a 5xx),
 * since moving that one on could send the message twice in one attempt; the retry then starts
 * elsewhere, the history saying where this one failed. No provider is called past the message's
 * deadline (its time to live) but the first.
 *
 * Breakers count the transient failures of their account and its refusals of itself (bad
 * credentials); any other answer counts as a sign of life. They live in the worker process: N
 * workers each learn of an outage on their own.
 */

export interface ProviderListOptions<M extends ProviderMessage> {
  /** For the events' labels (`sms`, `email`). */
  channel: string;
  /** Every account any list names; each provider's name is its account's (`twilio:backup`). */
  accounts: readonly Provider<M>[];
  /** The default order, by account name. */
  order: readonly string[];
  /** Organizations with an order of their own (by id), over the same accounts and breakers. */
  byOrganization?: ReadonlyMap<string, readonly string[]>;
  breaker: { failures: number; cooldownMs: number };
  /** Epoch milliseconds (default `Date.now`): the messages' deadlines, which are wall-clock times. */
  now?: () => number;
  /**
   * Milliseconds on a monotonic clock (default `performance.now`): the breakers' cool-downs, which a
   * wall clock's jump must not end early or stretch. A test passes its own clock to both.
   */
  clock?: () => number;
  onFailover?(channel: string, from: string, to: string): void;
  onBreakerChange?(channel: string, provider: string, from: BreakerState, to: BreakerState): void;
}

/** How long a delivery waits while a half-open breaker's probe is under way, at most. */
const PROBE_WAIT_MS = 1000;

interface Account<M extends ProviderMessage> {
  provider: Provider<M>;
  breaker: CircuitBreaker;
}

/** The default list; `forOrganization` answers the organizations' own lists. */
export function providerList<M extends ProviderMessage>(options: ProviderListOptions<M>): Provider<M> {
  const now = options.now ?? (() => Date.now());
  const clock = options.clock ?? (() => performance.now());
  const accounts = new Map<string, Account<M>>();
  for (const provider of options.accounts) {
    if (accounts.has(provider.name)) throw new Error(`provider ${provider.name} listed twice`);
    const breaker = new CircuitBreaker({
      ...options.breaker,
      now: clock,
      onChange: (from, to) => options.onBreakerChange?.(options.channel, provider.name, from, to),
    });
    accounts.set(provider.name, { provider, breaker });
  }
  const inOrder = (order: readonly string[]) =>
    order.map((name) => {
      const account = accounts.get(name);
      if (!account) throw new Error(`no account ${name} for the provider list`);
      return account;
    });
  const byOrganization = new Map(
    [...(options.byOrganization ?? [])].map(([organizationId, order]) => [
      organizationId,
      new ProviderList(options.channel, inOrder(order), now, options.onFailover),
    ]),
  );
  return new DefaultProviderList(
    options.channel,
    inOrder(options.order),
    now,
    options.onFailover,
    [...accounts.values()],
    byOrganization,
  );
}

class ProviderList<M extends ProviderMessage> implements Provider<M> {
  readonly name: string;
  readonly timeoutMs: number;
  readonly #channel: string;
  readonly #accounts: readonly Account<M>[];
  readonly #now: () => number;
  readonly #onFailover: ProviderListOptions<M>["onFailover"];

  constructor(
    channel: string,
    accounts: readonly Account<M>[],
    now: () => number,
    onFailover: ProviderListOptions<M>["onFailover"],
  ) {
    if (accounts.length === 0) throw new Error("a provider list names at least one provider");
    this.#channel = channel;
    this.#accounts = accounts;
    this.#now = now;
    this.#onFailover = onFailover;
    this.name = accounts.map(({ provider }) => provider.name).join(",");
    this.timeoutMs = worstCaseMs(accounts);
  }

  readyInMs(): number {
    let soonest = Number.POSITIVE_INFINITY;
    for (const { provider, breaker } of this.#accounts) {
      const ready = breaker.readyInMs();
      soonest = Math.min(
        soonest,
        Number.isFinite(ready) ? ready : Math.min(PROBE_WAIT_MS, provider.timeoutMs ?? PROBE_WAIT_MS),
      );
    }
    return soonest;
  }

  reserve(triedLast?: readonly string[]): ProviderReservation | undefined {
    return this.#reserve(this.#inOrder(triedLast));
  }

  #reserve(order: readonly Account<M>[]): AccountReservation<M> | undefined {
    for (const account of order) {
      const permit = account.breaker.acquire();
      if (permit) return new AccountReservation(account, permit);
    }
    return undefined;
  }

  async send(message: M, options: SendOptions = {}): Promise<DeliveryOutcome> {
    const failovers: ProviderFailover[] = [];
    const order = this.#inOrder(options.triedLast);
    // The call the worker reserved before it recorded the attempt; a caller that reserved none
    // (a test, a tool) gets one now.
    const given = options.reservation;
    const reservation =
      given instanceof AccountReservation && order.some((account) => account === given.account)
        ? (given as AccountReservation<M>)
        : this.#reserve(order);
    if (!reservation) return { ...noProviderCalled(), failovers };
    /** The last provider's failure, when it proved the message untaken: the attempt may move on. */
    let untaken: Failure | undefined;
    /** Whether an account of the list may take the message later (skipped now, or failed transiently). */
    let mayTakeItLater = order.indexOf(reservation.account) > 0;
    for (const account of order.slice(order.indexOf(reservation.account))) {
      const { provider, breaker } = account;
      if (untaken && options.deadline !== undefined && this.#now() >= options.deadline) break;
      const permit = account === reservation.account ? reservation.take() : breaker.acquire();
      if (!permit) {
        mayTakeItLater = true;
        continue;
      }
      let result: CallResult = "unused";
      let outcome: DeliveryOutcome;
      // Settled whatever happens: a permit never settled would leave a half-open breaker's probe
      // under way for ever, and the account skipped by everyone.
      try {
        if (untaken) {
          const { provider: from, error, detail } = untaken;
          failovers.push({ provider: from, error, ...(detail !== undefined && { detail }) });
          const onFailover = this.#onFailover;
          quietly(() => onFailover?.(this.#channel, from, provider.name));
        }
        outcome = await sendSafely(provider, message);
        result = countsAgainstBreaker(outcome) ? "failure" : "success";
      } finally {
        breaker.settle(permit, result);
      }
      if (outcome.ok || !movesOn(outcome)) return { ...outcome, failovers };
      if (outcome.error.class === "transient") mayTakeItLater = true;
      untaken = outcome;
    }
    if (untaken) return { ...retryableIf(mayTakeItLater, untaken), failovers };
    return { ...noProviderCalled(), failovers };
  }

  /** The accounts in order, those the previous attempt failed on last (each keeping its place). */
  #inOrder(triedLast: readonly string[] = []): Account<M>[] {
    if (triedLast.length === 0) return [...this.#accounts];
    const last = new Set(triedLast);
    const first = this.#accounts.filter(({ provider }) => !last.has(provider.name));
    return [...first, ...this.#accounts.filter(({ provider }) => last.has(provider.name))];
  }
}

/** The default list, which knows the organizations' lists and every account behind them. */
class DefaultProviderList<M extends ProviderMessage> extends ProviderList<M> {
  override readonly timeoutMs: number;
  readonly #all: readonly Account<M>[];
  readonly #byOrganization: ReadonlyMap<string, ProviderList<M>>;

  constructor(
    channel: string,
    accounts: readonly Account<M>[],
    now: () => number,
    onFailover: ProviderListOptions<M>["onFailover"],
    all: readonly Account<M>[],
    byOrganization: ReadonlyMap<string, ProviderList<M>>,
  ) {
    super(channel, accounts, now, onFailover);
    this.#all = all;
    this.#byOrganization = byOrganization;
    // The longest list's worst case: every provider refuses it untaken just before its time-out.
    this.timeoutMs = Math.max(
      worstCaseMs(accounts),
      ...[...byOrganization.values()].map((list) => list.timeoutMs),
    );
  }

  forOrganization(organizationId: string): Provider<M> {
    return this.#byOrganization.get(organizationId) ?? this;
  }

  breakers(): BreakerReading[] {
    return this.#all.map(({ provider, breaker }) => ({ provider: provider.name, state: breaker.state }));
  }

  async close(): Promise<void> {
    await Promise.all(this.#all.map(({ provider }) => provider.close?.()));
  }
}

/** The longest one attempt may take on `accounts`: each refuses it untaken just before its time-out. */
function worstCaseMs(accounts: readonly Account<ProviderMessage>[]): number {
  return accounts.reduce((sum, { provider }) => sum + (provider.timeoutMs ?? 0), 0);
}

type Failure = Extract<DeliveryOutcome, { ok: false }>;

/**
 * A call an attempt will make first, its breaker's permit taken before the attempt was recorded.
 * The permit is taken by the attempt's call, or given back unused by {@link release}: once.
 */
class AccountReservation<M extends ProviderMessage> implements ProviderReservation {
  readonly provider: string;
  readonly account: Account<M>;
  #permit: BreakerPermit | undefined;

  constructor(account: Account<M>, permit: BreakerPermit) {
    this.account = account;
    this.provider = account.provider.name;
    this.#permit = permit;
  }

  /** The permit, for the attempt's call; undefined once taken or released. */
  take(): BreakerPermit | undefined {
    const permit = this.#permit;
    this.#permit = undefined;
    return permit;
  }

  release(): void {
    const permit = this.take();
    if (permit) this.account.breaker.settle(permit, "unused");
  }
}

/**
 * No provider could be called. The worker never records it (it reserves a call before it records
 * an attempt, and hands the job back when it gets none); only a send without a reservation, at the
 * instant every breaker refuses, answers it. Events from before that amendment may carry it.
 */
function noProviderCalled(): Failure {
  return {
    ok: false,
    provider: NO_PROVIDER,
    error: {
      class: "transient",
      code: "providers_unavailable",
      message: "No provider was called: the circuit breaker of every provider was open",
    },
  };
}

/**
 * Whether an attempt may move on from this failure to the next account: the provider proved it
 * took nothing, and it failed transiently (a refused connection, a 429, an SMTP 4xx) or refused
 * the account rather than the recipient (credentials, a sender not this account's).
 */
function movesOn(outcome: Failure): boolean {
  return (
    outcome.notTaken === true && (outcome.error.class === "transient" || outcome.accountRefusal !== undefined)
  );
}

/**
 * What a breaker counts as a failure: a transient one, or a refusal of the account itself (every
 * message would meet it). Any other answer (a success, a rejected recipient, a permanent error, a
 * refusal of this message's sender) is a sign of life: it depends on the message, not the account.
 */
function countsAgainstBreaker(outcome: DeliveryOutcome): boolean {
  return !outcome.ok && (outcome.error.class === "transient" || outcome.accountRefusal === "account");
}

/**
 * The attempt's failure when it ran out of accounts: an account's refusal is permanent only when no
 * account of the list may take the message later; otherwise (one skipped by its breaker, one that
 * failed transiently) the attempt ends transient and its retry goes to the others first.
 */
function retryableIf(mayTakeItLater: boolean, failure: Failure): Failure {
  if (!mayTakeItLater || failure.error.class === "transient") return failure;
  return { ...failure, error: { ...failure.error, class: "transient" } };
}

/** Runs a hook (metrics, a log) whose failure must not cost the delivery anything. */
function quietly(hook: () => void): void {
  try {
    hook();
  } catch {
    // The attempt goes on: a metric missed is the lesser harm.
  }
}

/** A provider must not throw; one that does anyway has failed transiently, maybe after sending. */
async function sendSafely<M extends ProviderMessage>(
  provider: Provider<M>,
  message: M,
): Promise<DeliveryOutcome> {
  try {
    return await provider.send(message);
  } catch (error) {
    return {
      ok: false,
      provider: provider.name,
      error: { class: "transient", code: "provider_exception", message: "The provider failed unexpectedly" },
      detail: error instanceof Error ? error.message : String(error),
    };
  }
}
