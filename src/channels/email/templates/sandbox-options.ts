/** The settings of a sandbox and of one render (`sandbox.ts`), and the counts it keeps. */

export interface RenderSandboxOptions {
  /** Default `RENDER_DEADLINE_MS` (`sandbox.ts`). */
  deadlineMs?: number;
  /** Default `RENDER_HEAP_MB`. */
  heapMb?: number;
  /** Default `RENDER_THREADS`. */
  threads?: number;
  /** Default `RENDER_QUEUE_PER_ORGANIZATION`. */
  queuePerOrganization?: number;
  /**
   * Renders under way (waiting or running), all organizations together, past which every render
   * is refused, an organization's first too. Default: no such limit. The worker sets it so renders
   * never hold more than half of its delivery slots.
   */
  maxUnderWay?: number;
}

/** What one render asks for besides the template and its fields. */
export interface RenderOptions {
  /** Whose render it is: renders take turns by organization. Default: one shared anonymous owner. */
  organizationId?: string;
  /**
   * Aborted: the caller has given up; a render still waiting is dropped and never runs, one
   * running is ended with its thread (which is replaced).
   */
  signal?: AbortSignal;
  /**
   * The longest the caller will wait for a thread. When the organization's renders ahead of this
   * one are expected to take longer (from how long its recent renders took), it is refused at
   * once with a `RenderBusyError`.
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
  /** Renders refused at once (a `RenderBusyError`). */
  refused: number;
  /** Renders dropped from the queue because their caller gave up. */
  abandoned: number;
  /** Renders ended on their thread (the thread replaced) because their caller gave up. */
  cancelled: number;
  /** Renders waiting for a thread now. */
  waiting: number;
}
