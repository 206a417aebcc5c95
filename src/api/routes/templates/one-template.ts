import { z } from "zod";
import { SAMPLE_LIST_LENGTH } from "../../../channels/email/templates/render.js";
import {
  RenderAbandonedError,
  RenderBusyError,
  TemplateRenderError,
} from "../../../channels/email/templates/render-error.js";
import { RENDER_DEADLINE_MS, renderSandbox } from "../../../channels/email/templates/sandbox.js";
import {
  MAX_TEMPLATE_BODY_BYTES,
  templateCode,
  templateName,
  templateText,
} from "../../../channels/email/templates/schemas.js";
import { ApiError } from "../../../http/errors.js";
import {
  API_KEY_ERRORS,
  type ErrorStatus,
  errorResponses,
  jsonBodyErrors,
  SERVER_ERRORS,
} from "../../../http/openapi.js";
import type { AppContext, AppDeps } from "../../types.js";

/**
 * What the template routes share: the `{name}` parameter, the 404 of a template the key's
 * organization does not have, and the content (`code`, `text`) that create and update take.
 */

export const templateNameParams = z.object({ name: templateName });

/**
 * The error responses of a route naming one template: its 400 (`badRequest` says when), the API
 * key's, the 404 of a template the organization does not have, the server's, and `others`.
 */
export function oneTemplateErrors(badRequest: string, ...others: Partial<Record<ErrorStatus, string>>[]) {
  return errorResponses(
    { 400: badRequest },
    API_KEY_ERRORS,
    { 404: "No such template in the key's organization (another organization's looks the same)" },
    ...others,
    SERVER_ERRORS,
  );
}

/** Another organization's template is indistinguishable from an unknown one. */
export function noSuchTemplate(): ApiError {
  return new ApiError(404, "Template not found");
}

/** The fields of a template's content in a create or update body. */
export const contentFields = { code: templateCode, text: templateText };

/** A body of template content may be larger than the API's default. */
export const TEMPLATE_BODY = {
  maxBytes: MAX_TEMPLATE_BODY_BYTES,
  errors: jsonBodyErrors(MAX_TEMPLATE_BODY_BYTES),
};

/** The content as stored: an absent `text` is null (derived from the HTML when rendered). */
export function storedContent(content: { code: string; text?: string | null | undefined }) {
  return { code: content.code, text: content.text ?? null };
}

/**
 * What a preview's or a save's render waits with: the organization (renders take turns by it), a
 * signal that aborts once the request is given up (the client went away, or the request deadline
 * answered 503), and the longest wait worth queueing for, so that a render which could not finish
 * before the deadline is refused at once instead.
 */
export function renderOptionsFor(c: AppContext, deps: AppDeps) {
  const requestMs = deps.config.REQUEST_TIMEOUT_MS;
  return {
    organizationId: c.get("organization").id,
    signal: AbortSignal.any([c.req.raw.signal, AbortSignal.timeout(requestMs)]),
    maxWaitMs: Math.max(0, requestMs - RENDER_DEADLINE_MS),
  };
}

/**
 * What a render that did not happen answers: 429 with `Retry-After` when the organization's
 * renders are queued up to their limit; 503 when the request was given up meanwhile (its client
 * has its answer, or has gone). Anything else is rethrown.
 */
export function renderRefusal(error: unknown): ApiError {
  if (error instanceof RenderBusyError) {
    return new ApiError(429, error.message, { "Retry-After": String(Math.ceil(error.retryAfterMs / 1000)) });
  }
  if (error instanceof RenderAbandonedError) {
    return new ApiError(503, "Service temporarily unavailable; retry shortly", { "Retry-After": "5" });
  }
  throw error;
}

/**
 * A template is saved only if it renders a sample within the save budget (decision 0029): once
 * as Handlebars with every `{{#each}}` over a sample list, once as Mailchimp, in the sandbox with
 * `TEMPLATE_SAVE_RENDER_BUDGET_MS` and its usual heap. Over the budget, out of memory, or a
 * result past the rendered e-mail's length: 422 naming the reason. Template errors (a Handlebars
 * syntax error in a Mailchimp template) are not refused here; a preview shows them.
 */
export async function assertRendersWithinBudget(
  c: AppContext,
  deps: AppDeps,
  name: string,
  content: { code: string; text: string | null },
): Promise<void> {
  try {
    await renderSandbox.renderSample(content, name, {
      ...renderOptionsFor(c, deps),
      deadlineMs: deps.config.TEMPLATE_SAVE_RENDER_BUDGET_MS,
    });
  } catch (error) {
    if (error instanceof TemplateRenderError && error.limit) {
      throw new ApiError(
        422,
        `${error.message}, with sample data (every {{#each}} over ${SAMPLE_LIST_LENGTH} items); the template is not saved`,
      );
    }
    throw renderRefusal(error);
  }
}

/** The errors of a save's render check. */
export const SAVE_RENDER_ERRORS = {
  422: "The template cannot render a sample within the save budget (time, memory or length); the reason says which",
  429: "Too many renders of the organization's templates are waiting; `Retry-After` says when to retry",
} satisfies Partial<Record<ErrorStatus, string>>;
