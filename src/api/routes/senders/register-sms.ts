import { createRoute } from "@hono/zod-openapi";
import { z } from "zod";
import { smsSender } from "../../../channels/sms/request.js";
import { ApiError } from "../../../http/errors.js";
import { parseJsonBody } from "../../../http/json-body.js";
import { jsonContent } from "../../../http/openapi.js";
import { registerSender } from "../../../messages/senders.js";
import { defineRoute } from "../../types.js";
import { registerErrors, senderDeps, senderRecord, tooManySenders, toSenderRecord } from "./one-sender.js";

const body = z.strictObject({ sender: smsSender });

export const registerSmsSender = defineRoute({
  auth: "api-key",
  definition: createRoute({
    method: "post",
    path: "/api/v1/senders/sms",
    tags: ["Senders"],
    summary: "Register an SMS sender id",
    description:
      "Registers an alphanumeric sender id, a short code or a number, pending an operator's " +
      "review: no DNS proves who may use `BANK`, so an operator of the service approves it " +
      "(`npm run senders -- approve <id>`). With `SENDER_VERIFICATION=required` an SMS `sender` " +
      "must be an approved sender of the organization, or the platform's default (`SMS_DEFAULT_SENDER`).",
    request: { body: { required: true, content: jsonContent(body) } },
    responses: {
      201: { description: "Registered, pending an operator's approval", content: jsonContent(senderRecord) },
      ...registerErrors("Malformed JSON, a `sender` that is not an SMS sender, or an unknown field (named)"),
    },
  }),
  async handler(c, deps) {
    const request = await parseJsonBody(c, body);
    const organizationId = c.get("organization").id;
    const registered = await registerSender(senderDeps(deps), organizationId, "sms_sender", request.sender);
    if (registered.outcome === "exists")
      throw new ApiError(409, `The SMS sender ${request.sender} is already registered`);
    if (registered.outcome === "full") throw tooManySenders(deps.config.SENDER_MAX_PER_ORGANIZATION);
    return c.json(toSenderRecord(registered.sender), 201);
  },
});
