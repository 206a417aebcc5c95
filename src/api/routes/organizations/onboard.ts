import { createRoute } from "@hono/zod-openapi";
import { z } from "zod";
import { ApiError } from "../../../http/errors.js";
import { parseJsonBody } from "../../../http/json-body.js";
import { errorResponses, JSON_BODY_ERRORS, jsonContent, SERVER_ERRORS } from "../../../http/openapi.js";
import { createOrganizations, DuplicateOrganizationError } from "../../../store/organizations.js";
import { defineRoute } from "../../types.js";
import { productIdParam } from "../../wire/common-schemas.js";
import { createdOrganization } from "../../wire/organization.js";

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

export const onboardOrganizations = defineRoute({
  auth: "onboarding",
  definition: createRoute({
    method: "post",
    path: "/api/v1/onboarding/organizations/{productId}",
    tags: ["Onboarding"],
    summary: "Onboard organizations under a product",
    description:
      "All or nothing. Names are unique per product, case-insensitively. Each organization gets an API key.",
    request: {
      params: z.object({ productId: productIdParam }),
      body: { required: true, content: jsonContent(body) },
    },
    responses: {
      201: {
        description: "Every listed organization, with its API key",
        content: jsonContent(z.object({ organizations: z.array(createdOrganization) })),
      },
      ...errorResponses(
        { 400: "Malformed JSON, a field that breaks the schema, an unknown field, or a bad `productId`" },
        { 401: "`ONBOARDING_TOKEN` is set and the bearer token is missing or wrong" },
        { 409: "A name already used under the product (case-insensitive), also inside the request" },
        JSON_BODY_ERRORS,
        SERVER_ERRORS,
      ),
    },
  }),
  async handler(c, deps) {
    const { productId } = c.req.valid("param");
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
});
