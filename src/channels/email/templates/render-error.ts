/** Which part of the e-mail a template error was found in. */
export type RenderedPart = "subject" | "html" | "text";

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

  constructor(message: string, part: RenderedPart | null, options?: { cause?: unknown }) {
    super(message, options);
    this.part = part;
  }
}
