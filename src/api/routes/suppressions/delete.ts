import { createRoute } from "@hono/zod-openapi";
import { z } from "zod";
import { FORCED_LIFT_REASONS } from "../../../domain/suppression.js";
import { ApiError } from "../../../http/errors.js";
import { API_KEY_ERRORS, errorResponses, SERVER_ERRORS } from "../../../http/openapi.js";
import { liftSuppression } from "../../../store/suppressions.js";
import { defineRoute } from "../../types.js";
import { channel, parseRecipient } from "./one-suppression.js";

export const deleteSuppression = defineRoute({
  auth: "api-key",
  definition: createRoute({
    method: "delete",
    path: "/api/v1/suppressions/{channel}/{recipient}",
    tags: ["Suppressions"],
    summary: "Lift a suppression",
    description:
      "The recipient's next messages are sent again. An entry the recipient caused (`stop`, `complaint`) is " +
      "lifted only with `force=true`: sending after a STOP or a spam complaint may break the law, so be sure they asked.",
    request: {
      params: z.object({
        channel,
        recipient: z.string().meta({
          description:
            "URL-encoded: an E.164 number (`%2B14155550100`), an e-mail address or a push endpoint",
        }),
      }),
      query: z.strictObject({
        force: z
          .enum(["true", "false"], { error: "must be true or false" })
          .optional()
          .transform((v) => v === "true")
          .meta({ description: "`true` lifts a `stop` or `complaint` entry too" }),
      }),
    },
    responses: {
      204: { description: "Lifted; no body" },
      ...errorResponses(
        { 400: "An unknown channel, an invalid recipient, or a bad `force`" },
        API_KEY_ERRORS,
        { 404: "The recipient is not on the organization's list (another organization's looks the same)" },
        { 409: "The entry's reason is `stop` or `complaint` and `force=true` was not given" },
        SERVER_ERRORS,
      ),
    },
  }),
  async handler(c, deps) {
    const { channel, recipient } = c.req.valid("param");
    const { force } = c.req.valid("query");
    const parsed = parseRecipient(channel, recipient);
    if (!parsed.ok) throw new ApiError(400, `recipient: ${parsed.error}`);
    const lifted = await liftSuppression(
      deps.db,
      deps.store.content,
      c.get("organization").id,
      { channel, recipient: parsed.recipient },
      { force, protectedReasons: FORCED_LIFT_REASONS },
    );
    if (lifted.lifted) return c.body(null, 204);
    if (lifted.reason) {
      throw new ApiError(
        409,
        `The recipient is suppressed for reason ${lifted.reason} (their own opt-out or complaint): lift it with force=true only if they asked`,
      );
    }
    throw new ApiError(404, "No such recipient on the organization's suppression list");
  },
});
