/** Which part of the e-mail a template error was found in. */
export type RenderedPart = "subject" | "html" | "text";

/** The limit a render ran into, when it was one: the sandbox's time or memory, or the result's length. */
export type RenderLimit = "time" | "memory" | "length";

/**
 * The template, or what the request put into it, cannot be rendered: a Handlebars syntax error, a
 * missing helper or partial, markup nested too deeply to parse, a result too large, or a render
 * that ran out of time or memory in the sandbox. Never retried: the same input fails the same
 * way. The message names the template and the reason, since it is shown to the client in the
 * message's history.
 *
 * Kept apart from the renderer so the processes that only run the sandbox can recognise it
 * without loading Handlebars and the HTML libraries.
 */
export class TemplateRenderError extends Error {
  override readonly name = "TemplateRenderError";
  /** The part that failed; `null` when the render as a whole hit a limit (time, memory). */
  readonly part: RenderedPart | null;
  /** Set when the render ran into a limit rather than an error of the template's own. */
  readonly limit: RenderLimit | undefined;

  constructor(
    message: string,
    part: RenderedPart | null,
    options?: { cause?: unknown; limit?: RenderLimit | undefined },
  ) {
    super(message, options);
    this.part = part;
    this.limit = options?.limit;
  }
}

/**
 * The sandbox will not take this render now: the organization has as many renders waiting as it
 * may, or they would wait longer than the caller can. Nothing is wrong with the template; the
 * caller tries again after `retryAfterMs` (a preview answers 429, an e-mail's job is handed back).
 */
export class RenderBusyError extends Error {
  override readonly name = "RenderBusyError";
  constructor(
    message: string,
    /** About when the organization's renders will have made room. */
    readonly retryAfterMs: number,
  ) {
    super(message);
  }
}

/** The caller gave up (its signal aborted): the render never ran, or was ended while it ran. */
export class RenderAbandonedError extends Error {
  override readonly name = "RenderAbandonedError";
}
