import { RenderBusyError } from "./render-error.js";

/** An organization with renders waiting or running in the sandbox. */
export interface Organization {
  id: string;
  /** Its renders waiting for a thread, in the order asked. */
  waiting: unknown[];
  /** Its renders on a thread, and threads starting that count as its own (see `sandbox.ts`). */
  running: number;
  /** When it was last served (a count of renders taken); 0: not since it had nothing under way. */
  lastServed: number;
}

/** The limits a render is let in under. */
export interface TurnLimits {
  /** Threads one organization may run on at once. */
  threadsPerOrganization: number;
  queuePerOrganization: number;
  /** Renders under way (waiting or running), all organizations together; see RenderSandboxOptions. */
  maxUnderWay: number;
}

/** How many organizations' recent render times are remembered. */
const REMEMBERED_ORGANIZATIONS = 10_000;

/**
 * The sandbox's queues, one per organization, and whose turn it is (decision 0029): a free
 * thread takes the render of the organization served longest ago (a newcomer first), among
 * those running on fewer threads than they may. Knows nothing of threads; the sandbox tells it
 * what runs and finishes.
 */
export class Turns<R extends { organization: Organization }> {
  /** Organizations with renders waiting or running. */
  readonly #organizations = new Map<string, Organization>();
  /** Organizations with renders waiting. */
  readonly #waiting = new Set<Organization>();
  /** Renders taken so far: the clock of the turns. */
  #served = 0;
  /** Each organization's recent render time, ms (moving average); the oldest entries go first. */
  readonly #renderMs = new Map<string, number>();
  #waitingTotal = 0;

  /** Renders waiting, all organizations together. */
  get waiting(): number {
    return this.#waitingTotal;
  }

  /** The organization's entry: the one under way, or a new one (kept once it has a render). */
  organization(id: string): Organization {
    return this.#organizations.get(id) ?? { id, waiting: [], running: 0, lastServed: 0 };
  }

  /**
   * Why the organization may not queue one more render now, if it may not: its queue is full,
   * everyone's renders under way are at `maxUnderWay` (whoever they are), or its renders
   * ahead are expected (from how long its recent ones took) to take longer than `maxWaitMs`.
   */
  refusal(
    organization: Organization,
    limits: TurnLimits,
    running: number,
    maxWaitMs: number | undefined,
  ): RenderBusyError | undefined {
    const ahead = organization.waiting.length + organization.running;
    const perRenderMs = this.#renderMs.get(organization.id) ?? 0;
    const expectedWaitMs = Math.ceil(ahead / limits.threadsPerOrganization) * perRenderMs;
    const retryAfterMs = Math.max(100, Math.min(60_000, expectedWaitMs));
    if (organization.waiting.length >= limits.queuePerOrganization) {
      return new RenderBusyError(
        `Too many renders of this organization's templates are waiting (${organization.waiting.length}); retry shortly`,
        retryAfterMs,
      );
    }
    // Every organization, one with nothing under way too: otherwise W organizations with one
    // render each would hold W delivery slots (the worker hands a refused job back at no cost).
    if (this.#waitingTotal + running >= limits.maxUnderWay) {
      return new RenderBusyError("Too many renders are waiting; retry shortly", retryAfterMs);
    }
    if (maxWaitMs !== undefined && expectedWaitMs > maxWaitMs) {
      return new RenderBusyError(
        `This organization's renders ahead would take about ${expectedWaitMs} ms; retry shortly`,
        retryAfterMs,
      );
    }
    return undefined;
  }

  /** Queues a render behind its organization's others. */
  add(render: R): void {
    const { organization } = render;
    this.#organizations.set(organization.id, organization);
    organization.waiting.push(render);
    this.#waitingTotal++;
    this.#waiting.add(organization);
  }

  /** Takes a render out of its queue before its turn; false if it is not waiting. */
  remove(render: R): boolean {
    const { organization } = render;
    const index = organization.waiting.indexOf(render);
    if (index < 0) return false;
    organization.waiting.splice(index, 1);
    this.#waitingTotal--;
    if (organization.waiting.length === 0) this.#waiting.delete(organization);
    this.forgetIfIdle(organization);
    return true;
  }

  /** The next render in turn, now counted as running; undefined when none may run. */
  take(threadsPerOrganization: number): R | undefined {
    let next: Organization | undefined;
    for (const organization of this.#waiting) {
      if (organization.running >= threadsPerOrganization) continue;
      if (!next || organization.lastServed < next.lastServed) next = organization;
    }
    const render = next?.waiting.shift() as R | undefined;
    if (!next || !render) return undefined;
    this.#waitingTotal--;
    next.running++;
    next.lastServed = ++this.#served;
    if (next.waiting.length === 0) this.#waiting.delete(next);
    return render;
  }

  /** Empties every queue (the renderer cannot start); returns what waited. */
  takeAll(): R[] {
    const all: R[] = [];
    for (const organization of this.#waiting) {
      all.push(...(organization.waiting.splice(0) as R[]));
      this.forgetIfIdle(organization);
    }
    this.#waiting.clear();
    this.#waitingTotal = 0;
    return all;
  }

  /** One more (or, with -1, one fewer) of the organization's renders or held threads under way. */
  count(organization: Organization, change: 1 | -1): void {
    organization.running += change;
    if (change > 0) this.#organizations.set(organization.id, organization);
    else this.forgetIfIdle(organization);
  }

  forgetIfIdle(organization: Organization): void {
    if (organization.running === 0 && organization.waiting.length === 0) {
      this.#organizations.delete(organization.id);
    }
  }

  /** How long one of the organization's renders took: a slow one counts at once, fast ones over a few. */
  remember(organizationId: string, ms: number): void {
    const previous = this.#renderMs.get(organizationId);
    this.#renderMs.delete(organizationId);
    this.#renderMs.set(organizationId, previous === undefined ? ms : Math.max(ms, 0.5 * previous + 0.5 * ms));
    if (this.#renderMs.size > REMEMBERED_ORGANIZATIONS) {
      const oldest = this.#renderMs.keys().next().value;
      if (oldest !== undefined) this.#renderMs.delete(oldest);
    }
  }
}
