import { Worker } from "node:worker_threads";
import type { EmailTemplateSource, RenderedEmail, RenderInput } from "./render.js";
import {
  RenderAbandonedError,
  RenderBusyError,
  type RenderedPart,
  type RenderLimit,
  TemplateRenderError,
} from "./render-error.js";

/** A render still running after this fails, and its thread is replaced. */
export const RENDER_DEADLINE_MS = 2000;
/**
 * The thread's heap (V8 old generation): room for the renderer's libraries and the largest
 * template (512 KiB of HTML, regions filled, text derived) with a margin. Compiling Handlebars is
 * the greedy part, so a part with thousands of expressions fails here (docs/decisions/0006).
 */
export const RENDER_HEAP_MB = 64;
/** Threads per process (`TEMPLATE_RENDER_THREADS`). */
export const RENDER_THREADS = 2;
/** Renders one organization may have waiting for a thread, per process (`TEMPLATE_RENDER_QUEUE_PER_ORGANIZATION`). */
export const RENDER_QUEUE_PER_ORGANIZATION = 20;

/** What the sandbox sends its thread: one e-mail to render, or a template to try with sample data. */
export type RenderRequest =
  | { type: "render"; template: EmailTemplateSource; fields: RenderInput }
  | { type: "sample"; template: EmailTemplateSource; name: string };

/** What the thread answers: it is ready (once), or one render's result. */
export type RenderReply =
  | { type: "ready" }
  | { type: "rendered"; email: RenderedEmail }
  | { type: "sampled" }
  | { type: "failed"; message: string; part: RenderedPart | null; limit?: RenderLimit | undefined };

export interface RenderSandboxOptions {
  /** Default {@link RENDER_DEADLINE_MS}. */
  deadlineMs?: number;
  /** Default {@link RENDER_HEAP_MB}. */
  heapMb?: number;
  /** Default {@link RENDER_THREADS}. */
  threads?: number;
  /** Default {@link RENDER_QUEUE_PER_ORGANIZATION}. */
  queuePerOrganization?: number;
  /**
   * Renders under way (waiting or running), all organizations together, past which an
   * organization that already has one under way is refused (an organization with none is always
   * let in). Default: no such limit. The worker sets it so renders never hold more than half of
   * its delivery slots.
   */
  maxUnderWay?: number;
}

/** What one render asks for besides the template and its fields. */
export interface RenderOptions {
  /** Whose render it is: renders take turns by organization. Default: one shared anonymous owner. */
  organizationId?: string;
  /** Aborted: the caller has given up; a render still waiting is dropped and never runs. */
  signal?: AbortSignal;
  /**
   * The longest the caller will wait for a thread. When the organization's renders ahead of this
   * one are expected to take longer (from how long its recent renders took), it is refused at
   * once with a {@link RenderBusyError}.
   */
  maxWaitMs?: number;
  /** This render's deadline instead of the sandbox's. */
  deadlineMs?: number;
}

export interface RenderSandboxStats {
  /** Renders handed to a thread. */
  renders: number;
  /** Renders ended by the deadline. */
  timeouts: number;
  /** Renders ended by the heap limit. */
  outOfMemory: number;
  threadsStarted: number;
  /** Renders refused at once (a {@link RenderBusyError}). */
  refused: number;
  /** Renders dropped from the queue because their caller gave up. */
  abandoned: number;
  /** Renders waiting for a thread now. */
  waiting: number;
}

interface Queued {
  request: RenderRequest;
  name: string;
  organization: Organization;
  deadlineMs: number;
  resolve: (reply: RenderReply) => void;
  reject: (error: Error) => void;
  /** Removes the abort listener, if any. */
  release: () => void;
}

interface Organization {
  id: string;
  waiting: Queued[];
  running: number;
  /** When it was last served (a count of renders taken); 0: not since it had nothing under way. */
  lastServed: number;
}

interface RenderThread {
  worker: Worker;
  /** The renderer is loaded; a render's clock starts only then. */
  ready: boolean;
  running: { render: Queued; deadline: NodeJS.Timeout; startedAt: number } | undefined;
  /**
   * The organization whose render ended the thread this one replaces: until it is ready it counts
   * as one of that organization's, so the organization cannot take the last ready thread meanwhile.
   */
  heldBy: Organization | undefined;
}

/** How many organizations' recent render times are remembered. */
const REMEMBERED_ORGANIZATIONS = 10_000;

/**
 * Renders e-mails (`renderEmail` in `render.ts`) on threads of their own, so no template and no
 * variables can hold the calling process's event loop or take its heap: a render that runs past
 * the deadline, or needs more than the thread's heap, ends with its thread, and fails with a
 * {@link TemplateRenderError}, like any template error.
 *
 * Fair between organizations (docs/decisions/0029): a small pool of threads, started together on
 * the first render and each replaced when one is ended; one queue per organization, served in
 * turn (round-robin), so one organization's slow renders never sit in front of another's; an
 * organization runs on at most all threads but one, so another organization's render always
 * finds a thread within one render's time of a thread being free (with two threads, at once while
 * a single organization is slow). An organization's queue is capped; over it, or when the caller
 * could not wait that long, the render is refused at once ({@link RenderBusyError}); a render
 * whose caller has given up is dropped from its queue.
 */
export class RenderSandbox {
  readonly #stats: RenderSandboxStats = {
    renders: 0,
    timeouts: 0,
    outOfMemory: 0,
    threadsStarted: 0,
    refused: 0,
    abandoned: 0,
    waiting: 0,
  };
  #deadlineMs: number;
  #heapMb: number;
  #threadCount: number;
  #queuePerOrganization: number;
  #maxUnderWay: number;
  readonly #threads: (RenderThread | undefined)[] = [];
  /** Organizations with renders waiting or running. */
  readonly #organizations = new Map<string, Organization>();
  /** Organizations with renders waiting. */
  readonly #turns = new Set<Organization>();
  /** Renders taken from the queues so far: the clock of the turns. */
  #served = 0;
  /** Each organization's recent render time, ms (moving average); the oldest entries go first. */
  readonly #renderMs = new Map<string, number>();
  #waitingTotal = 0;
  #closing = false;
  #whenIdle: (() => void)[] = [];

  constructor(options: RenderSandboxOptions = {}) {
    this.#deadlineMs = options.deadlineMs ?? RENDER_DEADLINE_MS;
    this.#heapMb = options.heapMb ?? RENDER_HEAP_MB;
    this.#threadCount = Math.max(1, options.threads ?? RENDER_THREADS);
    this.#queuePerOrganization = options.queuePerOrganization ?? RENDER_QUEUE_PER_ORGANIZATION;
    this.#maxUnderWay = options.maxUnderWay ?? Number.POSITIVE_INFINITY;
  }

  /**
   * Applies a process's settings (its entry calls this before serving). Threads already started
   * keep running; a change of `threads` applies to the pool as threads are started.
   */
  configure(options: RenderSandboxOptions): void {
    if (options.deadlineMs !== undefined) this.#deadlineMs = options.deadlineMs;
    if (options.heapMb !== undefined) this.#heapMb = options.heapMb;
    if (options.threads !== undefined) this.#threadCount = Math.max(1, options.threads);
    if (options.queuePerOrganization !== undefined) this.#queuePerOrganization = options.queuePerOrganization;
    if (options.maxUnderWay !== undefined) this.#maxUnderWay = options.maxUnderWay;
  }

  /** Counts since the sandbox was made (a copy). */
  get stats(): RenderSandboxStats {
    return { ...this.#stats, waiting: this.#waitingTotal };
  }

  /** Threads one organization may run on at once: all but one, so another always has one. */
  get #threadsPerOrganization(): number {
    return Math.max(1, this.#threadCount - 1);
  }

  /**
   * Renders one e-mail, in its organization's turn.
   * @throws {TemplateRenderError} when the template cannot be rendered, including when it runs out
   *   of time or memory.
   * @throws {RenderBusyError} at once, when the organization has too many renders waiting, or its
   *   wait would be longer than `maxWaitMs`: worth trying again later.
   * @throws {RenderAbandonedError} when `signal` aborts before the render leaves the queue.
   * @throws {Error} when the thread cannot start: nothing to do with the template, so worth
   *   trying again later.
   */
  async render(
    template: EmailTemplateSource,
    fields: RenderInput,
    options: RenderOptions = {},
  ): Promise<RenderedEmail> {
    // Only what the renderer reads crosses to the thread (a stored template has more columns).
    const { template_name, template_content, message } = fields;
    const reply = await this.#enqueue(
      {
        type: "render",
        template: { code: template.code, text: template.text },
        fields: {
          template_name,
          template_content,
          message: {
            subject: message.subject,
            merge_language: message.merge_language,
            global_merge_vars: message.global_merge_vars,
          },
        },
      },
      template_name,
      options,
    );
    if (reply.type !== "rendered") throw new Error(`unexpected reply ${reply.type} to a render`);
    return reply.email;
  }

  /**
   * Renders a template once with sample data (`renderSample` in `render.ts`), as a save checks it.
   * Resolves when it rendered within the limits (template errors do not count).
   * @throws {TemplateRenderError} with `limit` set, when it ran out of time (`options.deadlineMs`)
   *   or memory, or its result was too long; and as {@link render} otherwise.
   */
  async renderSample(
    template: EmailTemplateSource,
    name: string,
    options: RenderOptions = {},
  ): Promise<void> {
    const request: RenderRequest = {
      type: "sample",
      template: { code: template.code, text: template.text },
      name,
    };
    await this.#enqueue(request, name, options);
  }

  #enqueue(request: RenderRequest, name: string, options: RenderOptions): Promise<RenderReply> {
    const { signal } = options;
    if (signal?.aborted) return Promise.reject(abandoned(name));
    const id = options.organizationId ?? "";
    const organization = this.#organizations.get(id) ?? { id, waiting: [], running: 0, lastServed: 0 };
    const refusal = this.#refusal(organization, options.maxWaitMs);
    if (refusal) {
      this.#stats.refused++;
      return Promise.reject(refusal);
    }
    this.#organizations.set(id, organization);
    return new Promise((resolve, reject) => {
      const render: Queued = {
        request,
        name,
        organization,
        deadlineMs: options.deadlineMs ?? this.#deadlineMs,
        resolve,
        reject,
        release: () => undefined,
      };
      if (signal) {
        const onAbort = () => this.#abandon(render);
        signal.addEventListener("abort", onAbort, { once: true });
        render.release = () => signal.removeEventListener("abort", onAbort);
      }
      organization.waiting.push(render);
      this.#waitingTotal++;
      this.#turns.add(organization);
      this.#next();
    });
  }

  /** Why the organization may not queue one more render now, if it may not. */
  #refusal(organization: Organization, maxWaitMs: number | undefined): RenderBusyError | undefined {
    const ahead = organization.waiting.length + organization.running;
    const perRenderMs = this.#renderMs.get(organization.id) ?? 0;
    const expectedWaitMs = Math.ceil(ahead / this.#threadsPerOrganization) * perRenderMs;
    const retryAfterMs = Math.max(100, Math.min(60_000, expectedWaitMs));
    if (organization.waiting.length >= this.#queuePerOrganization) {
      return new RenderBusyError(
        `Too many renders of this organization's templates are waiting (${organization.waiting.length}); retry shortly`,
        retryAfterMs,
      );
    }
    const running = this.#threads.filter((thread) => thread?.running).length;
    if (ahead > 0 && this.#waitingTotal + running >= this.#maxUnderWay) {
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

  /** The caller gave up: a render still waiting leaves its queue; one running finishes. */
  #abandon(render: Queued): void {
    const { organization } = render;
    const index = organization.waiting.indexOf(render);
    if (index < 0) return;
    organization.waiting.splice(index, 1);
    this.#waitingTotal--;
    if (organization.waiting.length === 0) this.#turns.delete(organization);
    this.#forgetIfIdle(organization);
    this.#stats.abandoned++;
    render.reject(abandoned(render.name));
    this.#next();
  }

  /**
   * Ends the threads once the renders asked for have finished. A render asked for later (a
   * request still in flight while its process shuts down) still runs, on threads that end with
   * it, so nothing fails and no idle thread is left behind.
   */
  close(): Promise<void> {
    this.#closing = true;
    return new Promise((resolve) => {
      this.#whenIdle.push(resolve);
      this.#next();
    });
  }

  #next(): void {
    if (this.#waitingTotal > 0) this.#fillPool();
    for (const thread of this.#threads) {
      if (!thread?.ready || thread.running) continue;
      const render = this.#take();
      if (!render) break;
      this.#run(thread, render);
    }
    if (this.#waitingTotal === 0 && this.#threads.every((t) => !t?.running)) this.#idle();
  }

  /**
   * The next render in turn (round-robin): of the organizations with renders waiting that may run
   * one more, the one served longest ago, or never (a newcomer goes before one just served).
   */
  #take(): Queued | undefined {
    let next: Organization | undefined;
    for (const organization of this.#turns) {
      if (organization.running >= this.#threadsPerOrganization) continue;
      if (!next || organization.lastServed < next.lastServed) next = organization;
    }
    const render = next?.waiting.shift();
    if (!next || !render) return undefined;
    this.#waitingTotal--;
    next.running++;
    next.lastServed = ++this.#served;
    if (next.waiting.length === 0) this.#turns.delete(next);
    return render;
  }

  #run(thread: RenderThread, render: Queued): void {
    thread.worker.ref();
    this.#stats.renders++;
    try {
      thread.worker.postMessage(render.request);
    } catch (error) {
      // The input cannot be copied to the thread (structured clone); it never will be.
      this.#settled(render);
      render.reject(
        failure(render, `its input could not be passed to the renderer: ${messageOf(error)}`, {
          cause: error,
        }),
      );
      return;
    }
    const deadline = setTimeout(() => this.#timedOut(thread), render.deadlineMs);
    thread.running = { render, deadline, startedAt: performance.now() };
  }

  /** Every slot of the pool has a thread, started or starting. */
  #fillPool(): void {
    for (let slot = 0; slot < this.#threadCount; slot++) {
      this.#threads[slot] ??= this.#start();
    }
  }

  #idle(): void {
    const waiting = this.#whenIdle.splice(0);
    const done = () => {
      for (const resolve of waiting) resolve();
    };
    if (this.#closing && this.#threads.some(Boolean)) {
      for (const thread of this.#threads) if (thread) this.#unhold(thread);
      const ending = this.#threads.splice(0).flatMap((thread) => (thread ? [thread.worker.terminate()] : []));
      Promise.all(ending).then(done, done);
    } else {
      // Idle threads alone must not keep the process alive.
      for (const thread of this.#threads) thread?.worker.unref();
      done();
    }
  }

  #start(): RenderThread {
    this.#stats.threadsStarted++;
    const thread: RenderThread = {
      worker: startThread(this.#heapMb),
      ready: false,
      running: undefined,
      heldBy: undefined,
    };
    // A replaced thread may still report as it dies; only a current one is listened to.
    const current = () => this.#threads.includes(thread);
    thread.worker.on("message", (reply: RenderReply) => current() && this.#replied(thread, reply));
    thread.worker.on("error", (error) => current() && this.#lost(thread, error));
    thread.worker.on(
      "exit",
      (code) => current() && this.#lost(thread, new Error(`the render thread exited with code ${code}`)),
    );
    return thread;
  }

  #replied(thread: RenderThread, reply: RenderReply): void {
    if (reply.type === "ready") {
      thread.ready = true;
      this.#unhold(thread);
    } else {
      const render = this.#finish(thread);
      if (reply.type === "failed") {
        render?.reject(new TemplateRenderError(reply.message, reply.part, { limit: reply.limit }));
      } else {
        render?.resolve(reply);
      }
    }
    this.#next();
  }

  #timedOut(thread: RenderThread): void {
    this.#end(thread);
    this.#stats.timeouts++;
    const render = this.#finish(thread);
    if (render) {
      this.#replace(thread, render.organization);
      render.reject(
        failure(render, `rendering took longer than the limit of ${render.deadlineMs} ms`, { limit: "time" }),
      );
    }
    this.#next();
  }

  /** The thread died by itself: out of memory, or (never expected) an error outside a render. */
  #lost(thread: RenderThread, error: Error): void {
    this.#end(thread);
    this.#unhold(thread);
    const render = this.#finish(thread);
    if (render) {
      this.#replace(thread, render.organization);
      const outOfMemory = (error as NodeJS.ErrnoException).code === "ERR_WORKER_OUT_OF_MEMORY";
      if (outOfMemory) this.#stats.outOfMemory++;
      render.reject(
        outOfMemory
          ? failure(render, `rendering needed more memory than the limit of ${this.#heapMb} MB`, {
              cause: error,
              limit: "memory",
            })
          : failure(render, `the renderer stopped: ${error.message}`, { cause: error }),
      );
    } else if (!thread.ready) {
      // It never loaded the renderer: a fault of this installation, not of any template, and
      // every render waiting would meet it. They fail as retryable errors.
      const failed = new Error(`The template sandbox's thread could not start: ${error.message}`, {
        cause: error,
      });
      for (const organization of this.#turns) {
        for (const waiting of organization.waiting.splice(0)) {
          this.#waitingTotal--;
          waiting.release();
          waiting.reject(failed);
        }
        this.#forgetIfIdle(organization);
      }
      this.#turns.clear();
      // Not replaced now: the next render asked for starts the pool again.
    }
    this.#next();
  }

  /**
   * Starts the thread that replaces one the organization's render ended, held by that
   * organization until it is ready. Without this, the organization's next render would take the
   * other, ready thread at once, and another organization's render would wait for this one's
   * start-up (a second or so on a busy machine).
   */
  #replace(ended: RenderThread, organization: Organization): void {
    if (this.#threads.includes(ended)) return;
    const slot = this.#threads.indexOf(undefined);
    if (slot < 0 || this.#closing) return;
    const thread = this.#start();
    this.#threads[slot] = thread;
    thread.heldBy = organization;
    organization.running++;
    this.#organizations.set(organization.id, organization);
  }

  /** The replacement is ready, or gone: its organization's hold ends. */
  #unhold(thread: RenderThread): void {
    const organization = thread.heldBy;
    if (!organization) return;
    thread.heldBy = undefined;
    organization.running--;
    this.#forgetIfIdle(organization);
  }

  /** Stops listening to the thread and ends it; its slot gets a new one when work comes. */
  #end(thread: RenderThread): void {
    const slot = this.#threads.indexOf(thread);
    if (slot >= 0) this.#threads[slot] = undefined;
    thread.worker.terminate().catch(() => undefined);
  }

  /** The thread's render is over: counted, timed, and its organization's place freed. */
  #finish(thread: RenderThread): Queued | undefined {
    const running = thread.running;
    thread.running = undefined;
    if (!running) return undefined;
    clearTimeout(running.deadline);
    const { render } = running;
    this.#remember(render.organization.id, performance.now() - running.startedAt);
    this.#settled(render);
    return render;
  }

  #settled(render: Queued): void {
    render.release();
    render.organization.running--;
    this.#forgetIfIdle(render.organization);
  }

  #forgetIfIdle(organization: Organization): void {
    if (organization.running === 0 && organization.waiting.length === 0) {
      this.#organizations.delete(organization.id);
    }
  }

  #remember(organizationId: string, ms: number): void {
    const previous = this.#renderMs.get(organizationId);
    this.#renderMs.delete(organizationId);
    // A slow render counts at once; fast ones bring the average down over a few renders.
    this.#renderMs.set(organizationId, previous === undefined ? ms : Math.max(ms, 0.5 * previous + 0.5 * ms));
    if (this.#renderMs.size > REMEMBERED_ORGANIZATIONS) {
      const oldest = this.#renderMs.keys().next().value;
      if (oldest !== undefined) this.#renderMs.delete(oldest);
    }
  }
}

function abandoned(name: string): RenderAbandonedError {
  return new RenderAbandonedError(`Template ${JSON.stringify(name)}: the render was given up before it ran`);
}

function failure(
  render: Queued,
  reason: string,
  options: { cause?: unknown; limit?: RenderLimit } = {},
): TemplateRenderError {
  return new TemplateRenderError(`Template ${JSON.stringify(render.name)}: ${reason}`, null, options);
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

function startThread(heapMb: number): Worker {
  const resourceLimits = { maxOldGenerationSizeMb: heapMb };
  const fromSources = import.meta.url.endsWith(".ts");
  const entry = new URL(`./render-thread.${fromSources ? "ts" : "js"}`, import.meta.url);
  if (!fromSources) return new Worker(entry, { resourceLimits });
  // Under vitest or tsx the entry is TypeScript. Node 20 does not apply `--import tsx` from a
  // worker's execArgv to its entry, so a two-line script registers tsx's loader first.
  const tsx = import.meta.resolve("tsx/esm/api");
  const bootstrap = `import(${JSON.stringify(tsx)}).then(({ register }) => { register(); return import(${JSON.stringify(entry.href)}); });`;
  return new Worker(bootstrap, { eval: true, resourceLimits });
}

/** The process's sandbox: the web process's previews and the worker's e-mails go through it. */
export const renderSandbox = new RenderSandbox();
