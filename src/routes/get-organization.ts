import { z } from "zod";
import { productIdParam, uuidParam } from "../http/common-schemas.js";
import { ApiError } from "../http/errors.js";
import { parseParams } from "../http/json-body.js";
import type { Route } from "../http/types.js";

const params = z.object({ product_id: productIdParam, organization_id: uuidParam("organization_id") });

export const getOrganization: Route = {
  method: "get",
  path: "/api/v1/onboarding/product/:product_id/organization/:organization_id",
  auth: "api-key",
  async handler(c) {
    const { product_id, organization_id } = parseParams(params, c.req.param());
    const organization = c.get("organization");
    // A key reads only its own organization; anything else looks like an unknown one.
    if (organization.id !== organization_id || organization.productId !== product_id) {
      throw new ApiError(404, "Organization not found");
    }
    const { id, name, active, productId } = organization;
    return c.json({ organization: { active, id, name, product_id: productId } }, 200);
  },
};
