import { createRoute } from "@hono/zod-openapi";
import { ApiError } from "../../../http/errors.js";
import { jsonContent } from "../../../http/openapi.js";
import { verifyDomain } from "../../../messages/senders.js";
import { DnsLookupError } from "../../../runtime/dns.js";
import { defineRoute } from "../../types.js";
import { noSuchSender, oneSenderErrors, senderIdParams, senderRecord, toSenderRecord } from "./one-sender.js";

/** How many of the TXT values found a 422 quotes, and how much of each. */
const QUOTED_RECORDS = 5;
const QUOTED_LENGTH = 100;

export const verifySenderDomain = defineRoute({
  auth: "api-key",
  // Each check is a DNS look-up of up to ~4.5 s.
  rateLimit: "sender-verify",
  definition: createRoute({
    method: "post",
    path: "/api/v1/senders/domains/{id}/verify",
    tags: ["Senders"],
    summary: "Check an e-mail domain's TXT record now",
    description:
      "Looks up the TXT records at `_notify-verification.<domain>` and marks the domain verified " +
      "when one of them is its `ntf-verify=…` value. A verified domain stays verified (no look-up).",
    request: { params: senderIdParams },
    responses: {
      200: { description: "The domain, verified", content: jsonContent(senderRecord) },
      ...oneSenderErrors({
        404: "No such e-mail domain in the key's organization (an SMS sender's id, another organization's look the same)",
        422: "The TXT record is not there, or holds another value (what was found is named)",
        429: "Too many domain checks: 1 a second per organization (bursts of 10); retry after `Retry-After` seconds",
        503: "DNS gave no answer (time-out, server failure), or Postgres is unavailable; retry after `Retry-After` seconds",
      }),
    },
  }),
  async handler(c, deps) {
    const { id } = c.req.valid("param");
    const organizationId = c.get("organization").id;
    let result: Awaited<ReturnType<typeof verifyDomain>>;
    try {
      result = await verifyDomain(
        { db: deps.db, now: deps.now, resolver: deps.txtResolver },
        organizationId,
        id,
      );
    } catch (error) {
      if (!(error instanceof DnsLookupError)) throw error;
      throw new ApiError(
        503,
        `DNS gave no answer for the domain's TXT record (${error.code}); try again later`,
        {
          "Retry-After": "30",
        },
      );
    }
    switch (result.outcome) {
      case "not_found":
        throw noSuchSender();
      case "verified":
        deps.senders.forget(organizationId);
        return c.json(toSenderRecord(result.sender), 200);
      case "not_proven": {
        const expected = result.sender.verificationToken;
        if (result.found.length === 0)
          throw new ApiError(422, `No TXT record at ${result.name}; publish one whose value is ${expected}`);
        const found = result.found
          .slice(0, QUOTED_RECORDS)
          .map((value) => JSON.stringify(value.slice(0, QUOTED_LENGTH)))
          .join(", ");
        throw new ApiError(
          422,
          `The TXT records at ${result.name} do not hold ${expected} (found ${result.found.length}: ${found})`,
        );
      }
    }
  },
});
