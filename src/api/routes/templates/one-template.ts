import { z } from "zod";
import {
  MAX_TEMPLATE_BODY_BYTES,
  templateCode,
  templateName,
  templateText,
} from "../../../channels/email/templates/schemas.js";
import { ApiError } from "../../errors.js";
import { API_KEY_ERRORS, errorResponses, jsonBodyErrors, SERVER_ERRORS } from "../../openapi.js";

/**
 * What the template routes share: the `{name}` parameter, the 404 of a template the key's
 * organization does not have, and the content (`code`, `text`) that create and update take.
 */

export const templateNameParams = z.object({ name: templateName });

export const NO_SUCH_TEMPLATE = {
  404: "No such template in the key's organization (another organization's looks the same)",
};

/** The errors of a route that names a template in its path and reads no body. */
export const oneTemplateErrors = errorResponses(
  { 400: "`name` is not a valid template name" },
  API_KEY_ERRORS,
  NO_SUCH_TEMPLATE,
  SERVER_ERRORS,
);

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
