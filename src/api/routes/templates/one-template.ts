import { z } from "zod";
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
