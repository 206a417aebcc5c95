import { createRoute } from "@hono/zod-openapi";
import { z } from "zod";
import { ApiError } from "../../../http/errors.js";
import { errorResponses, jsonContent, SERVER_ERRORS } from "../../../http/openapi.js";
import { findOrganization } from "../../../store/organizations.js";
import { defineRoute } from "../../types.js";
import { uuidParam } from "../../wire/common-schemas.js";

export const eraseOrganizationData = defineRoute({
  auth: "onboarding",
  definition: createRoute({
    method: "delete",
    path: "/api/v1/organizations/{organization_id}/data",
    tags: ["Onboarding"],
    summary: "Erase an organization's message content",
    description:
      "Destroys the organization's data keys: the content of every message it sent (recipients, bodies, " +
      "subjects, template fields, push subscriptions) can no longer be read, anywhere it is stored. The " +
      "messages stay, with their ids, statuses, timestamps and history; their content fields read `null`. " +
      "Processes that hold a key in memory drop it within `DATA_KEY_CACHE_TTL_MS`. Its webhook endpoints " +
      "are deleted, with their pending deliveries and attempts. The organization, its " +
      "API keys and its templates stay; a later send gets a new data key.",
    request: { params: z.object({ organization_id: uuidParam("organization_id") }) },
    responses: {
      200: {
        description: "Erased",
        content: jsonContent(
          z.object({
            organization_id: z.uuid(),
            data_keys_destroyed: z
              .int()
              .min(0)
              .meta({ description: "0 when it had sent nothing since the last erasure" }),
          }),
        ),
      },
      ...errorResponses(
        { 400: "A malformed `organization_id`" },
        { 401: "`ONBOARDING_TOKEN` is set and the bearer token is missing or wrong" },
        { 404: "No such organization" },
        SERVER_ERRORS,
      ),
    },
  }),
  async handler(c, deps) {
    const { organization_id } = c.req.valid("param");
    if (!(await findOrganization(deps.db, organization_id)))
      throw new ApiError(404, "Organization not found");
    const destroyed = await deps.store.eraseOrganization(organization_id);
    deps.logger.info({ organizationId: organization_id, destroyed }, "organization's message content erased");
    return c.json({ organization_id, data_keys_destroyed: destroyed }, 200);
  },
});
