import { z } from "zod";
import { productIdParam } from "../http/common-schemas.js";
import { ApiError } from "../http/errors.js";
import { parseJsonBody, parseParams } from "../http/json-body.js";
import type { Route } from "../http/types.js";
import { createOrganizations, DuplicateOrganizationError } from "../organizations/store.js";

const body = z.strictObject({
  organizations: z
    .array(
      z.strictObject({
        name: z
          .string({ error: "must be a string" })
          .trim()
          .min(1, "must not be empty")
          .max(100, "must be at most 100 characters"),
        active: z.boolean({ error: "must be true or false" }).default(true),
      }),
      {
        error: (issue) =>
          issue.code === "invalid_type"
            ? issue.input === undefined
              ? "is required"
              : "must be an array"
            : undefined,
      },
    )
    .min(1, "must list at least one organization")
    .max(100, "must list at most 100 organizations"),
});

export const onboardOrganizations: Route = {
  method: "post",
  path: "/api/v1/onboarding/organizations/:productId",
  auth: "onboarding",
  async handler(c, deps) {
    const { productId } = parseParams(z.object({ productId: productIdParam }), c.req.param());
    const { organizations } = await parseJsonBody(c, body);

    const seen = new Set<string>();
    for (const { name } of organizations) {
      if (seen.has(name.toLowerCase()))
        throw new ApiError(409, `Organization name "${name}" appears more than once in the request`);
      seen.add(name.toLowerCase());
    }

    try {
      const created = await deps.db.transaction((tx) => createOrganizations(tx, productId, organizations));
      return c.json(
        {
          organizations: created.map((o) => ({
            active: o.active,
            apiKey: o.apiKey,
            id: o.id,
            name: o.name,
            product_id: o.productId,
          })),
        },
        201,
      );
    } catch (error) {
      if (error instanceof DuplicateOrganizationError) {
        throw new ApiError(
          409,
          `An organization named "${error.organizationName}" already exists under product ${productId}`,
        );
      }
      throw error;
    }
  },
};
