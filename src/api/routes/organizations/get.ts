import { createRoute } from "@hono/zod-openapi";
import { z } from "zod";
import { ApiError } from "../../../http/errors.js";
import { API_KEY_ERRORS, errorResponses, jsonContent, SERVER_ERRORS } from "../../../http/openapi.js";
import { defineRoute } from "../../types.js";
import { productIdParam, uuidParam } from "../../wire/common-schemas.js";
import { organizationRecord } from "../../wire/organization.js";

export const getOrganization = defineRoute({
  auth: "api-key",
  definition: createRoute({
    method: "get",
    path: "/api/v1/onboarding/product/{product_id}/organization/{organization_id}",
    tags: ["Onboarding"],
    summary: "Read the key's own organization",
    request: {
      params: z.object({ product_id: productIdParam, organization_id: uuidParam("organization_id") }),
    },
    responses: {
      200: {
        description: "The organization",
        content: jsonContent(z.object({ organization: organizationRecord })),
      },
      ...errorResponses(
        { 400: "A malformed `product_id` or `organization_id`" },
        API_KEY_ERRORS,
        { 404: "Not the key's own organization under that product (looks like an unknown one)" },
        SERVER_ERRORS,
      ),
    },
  }),
  async handler(c) {
    const { product_id, organization_id } = c.req.valid("param");
    const organization = c.get("organization");
    // A key reads only its own organization; anything else looks like an unknown one.
    if (organization.id !== organization_id || organization.productId !== product_id) {
      throw new ApiError(404, "Organization not found");
    }
    const { id, name, active, productId } = organization;
    return c.json({ organization: { active, id, name, product_id: productId } }, 200);
  },
});
