import type { Worker } from "node:worker_threads";
import type { EmailTemplateSource, RenderedEmail, RenderInput } from "./render.js";
import { RenderAbandonedError, type RenderLimit, TemplateRenderError } from "./render-error.js";
import type { RenderOptions, RenderSandboxOptions, RenderSandboxStats } from "./sandbox-options.js";
import { type RenderReply, type RenderRequest, startThread } from "./thread.js";
import { type Organization, Turns } from "./turns.js";

export type { RenderOptions, RenderSandboxOptions, RenderSandboxStats } from "./sandbox-options.js";
export type { RenderReply, RenderRequest } from "./thread.js";

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
 * whose caller has given up is dropped from its queue, or, already running, ended with its thread.
 */
export class RenderSandbox {
  readonly #stats: RenderSandboxStats = {
    renders: 0,
    timeouts: 0,
    outOfMemory: 0,
    threadsStarted: 0,
    refused: 0,
    abandoned: 0,
    cancelled: 0,
    waiting: 0,
  };
  #deadlineMs: number;
  #heapMb: number;
  #threadCount: number;
  #queuePerOrganization: number;
  #maxUnderWay: number;
  readonly #threads: (RenderThread | undefined)[] = [];
  readonly #turns = new Turns<Queued>();
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
    return { ...this.#stats, waiting: this.#turns.waiting };
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
   * @throws {RenderAbandonedError} when `signal` aborts before the render has finished (a running
   *   render is ended with its thread).
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
    const organization = this.#turns.organization(options.organizationId ?? "");
    const limits = {
      threadsPerOrganization: this.#threadsPerOrganization,
      queuePerOrganization: this.#queuePerOrganization,
      maxUnderWay: this.#maxUnderWay,
    };
    const running = this.#threads.filter((thread) => thread?.running).length;
    const refusal = this.#turns.refusal(organization, limits, running, options.maxWaitMs);
    if (refusal) {
      this.#stats.refused++;
      return Promise.reject(refusal);
    }
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
      this.#turns.add(render);
      this.#next();
    });
  }

  /**
   * The caller gave up: a render still waiting leaves its queue; one running ends with its thread,
   * which is replaced as after a deadline (held by the organization until ready), so nobody's
   * render waits for work whose answer nobody will read.
   */
  #abandon(render: Queued): void {
    if (this.#turns.remove(render)) {
      this.#stats.abandoned++;
      render.reject(abandoned(render.name));
    } else {
      const thread = this.#threads.find((candidate) => candidate?.running?.render === render);
      if (!thread) return;
      this.#end(thread);
      this.#stats.cancelled++;
      // Cut short, its time says nothing of what the organization's renders cost.
      this.#finish(thread, { timed: false });
      this.#replace(thread, render.organization);
      render.reject(
        new RenderAbandonedError(
          `Template ${JSON.stringify(render.name)}: the render was given up while it ran`,
        ),
      );
    }
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
    if (this.#turns.waiting > 0) this.#fillPool();
    for (const thread of this.#threads) {
      if (!thread?.ready || thread.running) continue;
      const render = this.#turns.take(this.#threadsPerOrganization);
      if (!render) break;
      this.#run(thread, render);
    }
    if (this.#turns.waiting === 0 && this.#threads.every((t) => !t?.running)) this.#idle();
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
      for (const waiting of this.#turns.takeAll()) {
        waiting.release();
        waiting.reject(failed);
      }
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
    this.#turns.count(organization, 1);
  }

  /** The replacement is ready, or gone: its organization's hold ends. */
  #unhold(thread: RenderThread): void {
    const organization = thread.heldBy;
    if (!organization) return;
    thread.heldBy = undefined;
    this.#turns.count(organization, -1);
  }

  /** Stops listening to the thread and ends it; its slot gets a new one when work comes. */
  #end(thread: RenderThread): void {
    const slot = this.#threads.indexOf(thread);
    if (slot >= 0) this.#threads[slot] = undefined;
    thread.worker.terminate().catch(() => undefined);
  }

  /** The thread's render is over: counted, timed (unless cut short by its caller), and its organization's place freed. */
  #finish(thread: RenderThread, { timed } = { timed: true }): Queued | undefined {
    const running = thread.running;
    thread.running = undefined;
    if (!running) return undefined;
    clearTimeout(running.deadline);
    const { render } = running;
    if (timed) this.#turns.remember(render.organization.id, performance.now() - running.startedAt);
    this.#settled(render);
    return render;
  }

  #settled(render: Queued): void {
    render.release();
    this.#turns.count(render.organization, -1);
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

/** The process's sandbox: the web process's previews and the worker's e-mails go through it. */
export const renderSandbox = new RenderSandbox();
