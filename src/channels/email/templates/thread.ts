import { Worker } from "node:worker_threads";
import type { EmailTemplateSource, RenderedEmail, RenderInput } from "./render.js";
import type { RenderedPart, RenderLimit } from "./render-error.js";

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

/**
 * Starts one of the sandbox's threads (`render-thread.ts`) with `heapMb` of heap; it posts
 * `{ type: "ready" }` once the renderer is loaded.
 */
export function startThread(heapMb: number): Worker {
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
