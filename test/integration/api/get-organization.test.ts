import { eq } from "drizzle-orm";
import { afterAll, describe, expect, it } from "vitest";
import { organizations } from "../../../db/schema.js";
import { createHarness, onboard } from "../../support/harness.js";

const h = createHarness({ AUTH_CACHE_TTL_MS: "0" });
afterAll(() => h.close());

function get(productId: string, organizationId: string, apiKey?: string) {
  return h.app.request(`/api/v1/onboarding/product/${productId}/organization/${organizationId}`, {
    headers: apiKey ? { "x-api-key": apiKey } : {},
  });
}

describe("GET /api/v1/onboarding/product/{product_id}/organization/{organization_id}", () => {
  it("returns the key's own organization", async () => {
    const org = await onboard(h, { name: "Reader" });
    const response = await get(org.productId, org.id, org.apiKey);
    expect(response.status).toBe(200);
    expect(await response.json()).toEqual({
      organization: { active: true, id: org.id, name: "Reader", product_id: org.productId },
    });
  });

  it("answers 404 for another organization, exactly as for an unknown one", async () => {
    const mine = await onboard(h);
    const theirs = await onboard(h, { productId: mine.productId });
    const other = await get(mine.productId, theirs.id, mine.apiKey);
    const unknown = await get(mine.productId, "01900000-0000-7000-8000-000000000000", mine.apiKey);
    expect(other.status).toBe(404);
    expect(unknown.status).toBe(404);
    expect(await other.json()).toEqual(await unknown.json());
  });

  it("answers 404 when the product does not match the organization", async () => {
    const org = await onboard(h);
    expect((await get("another-product", org.id, org.apiKey)).status).toBe(404);
  });

  it("answers 400 for a malformed organization id", async () => {
    const org = await onboard(h);
    const response = await get(org.productId, "not-a-uuid", org.apiKey);
    expect(response.status).toBe(400);
    expect(await response.json()).toEqual({ error: "organization_id: organization_id must be a UUID" });
  });

  it("answers 401 without a key", async () => {
    const org = await onboard(h);
    expect((await get(org.productId, org.id)).status).toBe(401);
  });

  it("answers 403 once the organization is inactive", async () => {
    const org = await onboard(h);
    await h.db.update(organizations).set({ active: false }).where(eq(organizations.id, org.id));
    const response = await get(org.productId, org.id, org.apiKey);
    expect(response.status).toBe(403);
    expect(await response.json()).toEqual({ error: "Organization is inactive" });
  });
});
