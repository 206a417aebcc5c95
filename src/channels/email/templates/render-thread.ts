/**
 * A thread of the sandbox's pool (see `sandbox.ts`): renders one e-mail (or one sample) per
 * message it receives and answers each with the result or the reason it failed. It holds the only
 * copy of Handlebars and the HTML libraries the calling process ever loads.
 */
import { parentPort } from "node:worker_threads";
import { renderEmail, renderSample, TemplateRenderError } from "./render.js";
import type { RenderReply, RenderRequest } from "./thread.js";

const port = parentPort;
if (!port) throw new Error("render-thread runs as the template sandbox's worker thread only");

port.on("message", (request: RenderRequest) => port.postMessage(render(request)));
// The renderer and its libraries are loaded: the sandbox may start its clock.
port.postMessage({ type: "ready" } satisfies RenderReply);

function render(request: RenderRequest): RenderReply {
  const name = request.type === "render" ? request.fields.template_name : request.name;
  try {
    if (request.type === "sample") {
      renderSample(request.template, name);
      return { type: "sampled" };
    }
    return { type: "rendered", email: renderEmail(request.template, request.fields) };
  } catch (error) {
    // renderEmail reports every failure as a TemplateRenderError; anything else is still the
    // template's doing, since nothing else runs here.
    if (error instanceof TemplateRenderError)
      return { type: "failed", message: error.message, part: error.part, limit: error.limit };
    const reason = error instanceof Error ? error.message : String(error);
    return {
      type: "failed",
      message: `Template ${JSON.stringify(name)} could not be rendered: ${reason}`,
      part: null,
    };
  }
}
