import { Worker } from "node:worker_threads";
import type { EmailTemplateSource, RenderedEmail, RenderInput } from "./render.js";
import { type RenderedPart, TemplateRenderError } from "./render-error.js";

/** A render still running after this fails, and its thread is replaced. */
export const RENDER_DEADLINE_MS = 2000;
/**
 * The thread's heap (V8 old generation): room for the renderer's libraries and the largest
 * template (512 KiB of HTML, regions filled, text derived) with a margin. Compiling Handlebars is
 * the greedy part, so a part with thousands of expressions fails here (docs/decisions/0006).
 */
export const RENDER_HEAP_MB = 64;

/** What the sandbox sends its thread: one e-mail to render. */
export interface RenderRequest {
  template: EmailTemplateSource;
  fields: RenderInput;
}

/** What the thread answers: it is ready (once), or one render's result. */
export type RenderReply =
  | { type: "ready" }
  | { type: "rendered"; email: RenderedEmail }
  | { type: "failed"; message: string; part: RenderedPart | null };

export interface RenderSandboxOptions {
  /** Default {@link RENDER_DEADLINE_MS}. */
  deadlineMs?: number;
  /** Default {@link RENDER_HEAP_MB}. */
  heapMb?: number;
}

export interface RenderSandboxStats {
  /** Renders handed to a thread. */
  renders: number;
  /** Renders ended by the deadline. */
  timeouts: number;
  /** Renders ended by the heap limit. */
  outOfMemory: number;
  threadsStarted: number;
}

interface Queued {
  request: RenderRequest;
  resolve: (email: RenderedEmail) => void;
  reject: (error: Error) => void;
}

interface RenderThread {
  worker: Worker;
  /** The renderer is loaded; a render's clock starts only then. */
  ready: boolean;
}

/**
 * Renders e-mails (`renderEmail` in `render.ts`) on a thread of its own, so no template
 * and no variables can hold the calling process's event loop or take its heap: a render that runs
 * past the deadline, or needs more than the thread's heap, ends with its thread, and fails with a
 * {@link TemplateRenderError}, like any template error. One thread, started on the first render
 * (the process pays nothing for it until then) and replaced when one is ended; one render at a
 * time, in the order asked, so renders queued behind a failed one run on the next thread.
 */
export class RenderSandbox {
  readonly #stats: RenderSandboxStats = { renders: 0, timeouts: 0, outOfMemory: 0, threadsStarted: 0 };
  readonly #deadlineMs: number;
  readonly #heapMb: number;
  readonly #queue: Queued[] = [];
  #running: { render: Queued; deadline: NodeJS.Timeout } | undefined;
  #thread: RenderThread | undefined;
  #closing = false;
  #whenIdle: (() => void)[] = [];

  constructor(options: RenderSandboxOptions = {}) {
    this.#deadlineMs = options.deadlineMs ?? RENDER_DEADLINE_MS;
    this.#heapMb = options.heapMb ?? RENDER_HEAP_MB;
  }

  /** Counts since the sandbox was made (a copy). */
  get stats(): RenderSandboxStats {
    return { ...this.#stats };
  }

  /**
   * Renders one e-mail, after those already asked for.
   * @throws {TemplateRenderError} when the template cannot be rendered, including when it runs out
   *   of time or memory.
   * @throws {Error} when the thread cannot start: nothing to do with the template, so worth
   *   trying again later.
   */
  render(template: EmailTemplateSource, fields: RenderInput): Promise<RenderedEmail> {
    // Only what the renderer reads crosses to the thread (a stored template has more columns).
    const { template_name, template_content, message } = fields;
    const request: RenderRequest = {
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
    };
    return new Promise((resolve, reject) => {
      this.#queue.push({ request, resolve, reject });
      this.#next();
    });
  }

  /**
   * Ends the thread once the renders asked for have finished. A render asked for later (a request
   * still in flight while its process shuts down) still runs, on a thread that ends with it, so
   * nothing fails and no idle thread is left behind.
   */
  close(): Promise<void> {
    this.#closing = true;
    return new Promise((resolve) => {
      this.#whenIdle.push(resolve);
      this.#next();
    });
  }

  #next(): void {
    while (!this.#running) {
      const render = this.#queue[0];
      if (!render) {
        this.#idle();
        return;
      }
      this.#thread ??= this.#start();
      const thread = this.#thread;
      thread.worker.ref();
      if (!thread.ready) return; // its "ready" calls this again
      this.#queue.shift();
      this.#stats.renders++;
      try {
        thread.worker.postMessage(render.request);
      } catch (error) {
        // The input cannot be copied to the thread (structured clone); it never will be.
        render.reject(
          failure(render, `its input could not be passed to the renderer: ${messageOf(error)}`, error),
        );
        continue;
      }
      const deadline = setTimeout(() => this.#timedOut(thread), this.#deadlineMs);
      this.#running = { render, deadline };
    }
  }

  #idle(): void {
    const waiting = this.#whenIdle.splice(0);
    const done = () => {
      for (const resolve of waiting) resolve();
    };
    const thread = this.#thread;
    if (thread && this.#closing) {
      this.#thread = undefined;
      thread.worker.terminate().then(done, done);
    } else {
      // An idle thread alone must not keep the process alive.
      thread?.worker.unref();
      done();
    }
  }

  #start(): RenderThread {
    this.#stats.threadsStarted++;
    const thread: RenderThread = { worker: startThread(this.#heapMb), ready: false };
    // A replaced thread may still report as it dies; only the current one is listened to.
    const current = () => this.#thread === thread;
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
    } else {
      const render = this.#finish();
      if (reply.type === "rendered") render?.resolve(reply.email);
      else render?.reject(new TemplateRenderError(reply.message, reply.part));
    }
    this.#next();
  }

  #timedOut(thread: RenderThread): void {
    this.#end(thread);
    this.#stats.timeouts++;
    const render = this.#finish();
    render?.reject(failure(render, `rendering took longer than the limit of ${this.#deadlineMs} ms`));
    this.#next();
  }

  /** The thread died by itself: out of memory, or (never expected) an error outside a render. */
  #lost(thread: RenderThread, error: Error): void {
    this.#end(thread);
    const render = this.#finish();
    if (render) {
      const outOfMemory = (error as NodeJS.ErrnoException).code === "ERR_WORKER_OUT_OF_MEMORY";
      if (outOfMemory) this.#stats.outOfMemory++;
      render.reject(
        outOfMemory
          ? failure(render, `rendering needed more memory than the limit of ${this.#heapMb} MB`, error)
          : failure(render, `the renderer stopped: ${error.message}`, error),
      );
    } else if (!thread.ready) {
      // It never loaded the renderer: a fault of this installation, not of any template, and
      // every render waiting would meet it. They fail as retryable errors.
      const failed = new Error(`The template sandbox's thread could not start: ${error.message}`, {
        cause: error,
      });
      for (const waiting of this.#queue.splice(0)) waiting.reject(failed);
    }
    this.#next();
  }

  /** Stops listening to the thread and ends it; the next render starts another. */
  #end(thread: RenderThread): void {
    if (this.#thread === thread) this.#thread = undefined;
    thread.worker.terminate().catch(() => undefined);
  }

  #finish(): Queued | undefined {
    const running = this.#running;
    this.#running = undefined;
    if (running) clearTimeout(running.deadline);
    return running?.render;
  }
}

function failure(render: Queued, reason: string, cause?: unknown): TemplateRenderError {
  const name = JSON.stringify(render.request.fields.template_name);
  return new TemplateRenderError(`Template ${name}: ${reason}`, null, { cause });
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
