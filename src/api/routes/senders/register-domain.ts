import { createRoute } from "@hono/zod-openapi";
import { z } from "zod";
import { normaliseDomain } from "../../../domain/senders.js";
import { ApiError } from "../../../http/errors.js";
import { parseJsonBody } from "../../../http/json-body.js";
import { jsonContent } from "../../../http/openapi.js";
import { registerSender } from "../../../messages/senders.js";
import { defineRoute } from "../../types.js";
import { registerErrors, senderDeps, senderRecord, tooManySenders, toSenderRecord } from "./one-sender.js";

const domain = z
  .string({ error: "must be a string" })
  .transform((value, ctx) => {
    const normalised = normaliseDomain(value);
    if (normalised === undefined) {
      ctx.addIssue({
        code: "custom",
        message: "must be a domain name such as example.com (letters, digits, hyphens; xn-- for others)",
      });
      return z.NEVER;
    }
    return normalised;
  })
  .meta({
    description:
      "The domain of the `from_email` addresses to send from, exactly: a subdomain is registered on its own",
    example: "example.com",
  });

const body = z.strictObject({ domain });

export const registerDomain = defineRoute({
  auth: "api-key",
  definition: createRoute({
    method: "post",
    path: "/api/v1/senders/domains",
    tags: ["Senders"],
    summary: "Register an e-mail sending domain",
    description:
      "Registers the domain, pending, and answers with the TXT record to publish in its DNS " +
      "(`_notify-verification.<domain>`, a random `ntf-verify=…` value); once it is published, " +
      "`POST /api/v1/senders/domains/{id}/verify` checks it. With `SENDER_VERIFICATION=required` " +
      "an e-mail's `from_email` must be at a verified domain of the organization.",
    request: { body: { required: true, content: jsonContent(body) } },
    responses: {
      201: { description: "Registered, pending its DNS record", content: jsonContent(senderRecord) },
      ...registerErrors("Malformed JSON, a `domain` that is not a domain name, or an unknown field (named)"),
    },
  }),
  async handler(c, deps) {
    const request = await parseJsonBody(c, body);
    const organizationId = c.get("organization").id;
    const registered = await registerSender(senderDeps(deps), organizationId, "email_domain", request.domain);
    if (registered.outcome === "exists")
      throw new ApiError(409, `The domain ${request.domain} is already registered`);
    if (registered.outcome === "full") throw tooManySenders(deps.config.SENDER_MAX_PER_ORGANIZATION);
    return c.json(toSenderRecord(registered.sender), 201);
  },
});
