import { z } from "zod";
import { ApiError } from "../../../http/errors.js";
import { API_KEY_ERRORS, errorResponses, SERVER_ERRORS } from "../../../http/openapi.js";
import { uuidParam } from "../../wire/common-schemas.js";

/** What the routes reading one message by `{message_id}` share: the parameter, the errors, the 404. */

export const messageIdParams = z.object({ message_id: uuidParam("message_id") });

export const oneMessageErrors = errorResponses(
  { 400: "`message_id` is not a UUID" },
  API_KEY_ERRORS,
  { 404: "No such message in the key's organization (another organization's looks the same)" },
  SERVER_ERRORS,
);

/** Another organization's message is indistinguishable from an unknown one. */
export function noSuchMessage(): ApiError {
  return new ApiError(404, "Message not found");
}
