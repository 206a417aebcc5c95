import { eq } from "drizzle-orm";
import { afterAll, describe, expect, it } from "vitest";
import { apiKeys, organizations } from "../../../db/schema.js";
import { hashApiKey } from "../../../src/runtime/api-keys.js";
import { createHarness, expectError, uniqueProduct } from "../../support/harness.js";

const h = createHarness();
const guarded = createHarness({ ONBOARDING_TOKEN: "s3cret-onboarding-token" });
afterAll(async () => {
  await h.close();
  await guarded.close();
});

function post(harness = h, productId: string, body: unknown, headers: Record<string, string> = {}) {
  return harness.app.request(`/api/v1/onboarding/organizations/${productId}`, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body: typeof body === "string" ? body : JSON.stringify(body),
  });
}

describe("POST /api/v1/onboarding/organizations/{productId}", () => {
  it("creates every listed organization with a key of its own and answers 201", async () => {
    const productId = uniqueProduct();
    const response = await post(h, productId, {
      organizations: [
        { name: "Acme", active: true },
        { name: "Globex", active: false },
      ],
    });
    expect(response.status).toBe(201);
    const { organizations: created } = (await response.json()) as {
      organizations: Array<Record<string, unknown>>;
    };
    expect(created).toHaveLength(2);
    for (const org of created) {
      expect(Object.keys(org).sort()).toEqual(["active", "apiKey", "id", "name", "product_id"]);
      expect(org.product_id).toBe(productId);
      expect(org.apiKey).toMatch(/^ntf_[A-Za-z0-9_-]{43}$/);
      expect(org.id).toMatch(/^[0-9a-f-]{36}$/);
    }
    expect(created.map((o) => [o.name, o.active])).toEqual([
      ["Acme", true],
      ["Globex", false],
    ]);
    expect(created[0]?.apiKey).not.toBe(created[1]?.apiKey);
  });

  it("defaults active to true and trims names", async () => {
    const response = await post(h, uniqueProduct(), { organizations: [{ name: "  Initech  " }] });
    expect(response.status).toBe(201);
    const { organizations: created } = (await response.json()) as {
      organizations: Array<{ name: string; active: boolean }>;
    };
    expect(created[0]).toMatchObject({ name: "Initech", active: true });
  });

  it("stores only the SHA-256 hash of each key, never the key itself", async () => {
    const response = await post(h, uniqueProduct(), { organizations: [{ name: "Hashed" }] });
    const { organizations: created } = (await response.json()) as {
      organizations: Array<{ id: string; apiKey: string }>;
    };
    const org = created[0];
    if (!org) throw new Error("no organization");
    const rows = await h.db.select().from(apiKeys).where(eq(apiKeys.organizationId, org.id));
    expect(rows).toHaveLength(1);
    expect(rows[0]?.keyHash).toBe(hashApiKey(org.apiKey));
    expect(JSON.stringify(rows)).not.toContain(org.apiKey);
  });

  it("refuses a name already used under the product, in any case, with 409 naming it", async () => {
    const productId = uniqueProduct();
    expect((await post(h, productId, { organizations: [{ name: "Umbrella" }] })).status).toBe(201);
    await expectError(
      await post(h, productId, { organizations: [{ name: "UMBRELLA" }] }),
      409,
      /UMBRELLA|Umbrella/,
    );
  });

  it("allows the same name under another product", async () => {
    expect((await post(h, uniqueProduct(), { organizations: [{ name: "Shared Name" }] })).status).toBe(201);
    expect((await post(h, uniqueProduct(), { organizations: [{ name: "Shared Name" }] })).status).toBe(201);
  });

  it("refuses duplicates inside one request with 409 and creates nothing", async () => {
    const productId = uniqueProduct();
    await expectError(
      await post(h, productId, { organizations: [{ name: "Twin" }, { name: "twin" }] }),
      409,
      /twin/i,
    );
    const rows = await h.db.select().from(organizations).where(eq(organizations.productId, productId));
    expect(rows).toHaveLength(0);
  });

  it("is all-or-nothing: one taken name means none of the batch is created", async () => {
    const productId = uniqueProduct();
    await post(h, productId, { organizations: [{ name: "Taken" }] });
    await expectError(
      await post(h, productId, { organizations: [{ name: "Fresh" }, { name: "Taken" }] }),
      409,
    );
    const rows = await h.db.select().from(organizations).where(eq(organizations.productId, productId));
    expect(rows.map((r) => r.name)).toEqual(["Taken"]);
  });

  it("gives exactly one 201 when ten requests race for one name", async () => {
    const productId = uniqueProduct();
    const responses = await Promise.all(
      Array.from({ length: 10 }, () => post(h, productId, { organizations: [{ name: "Racer" }] })),
    );
    const statuses = responses.map((r) => r.status).sort();
    expect(statuses.filter((s) => s === 201)).toHaveLength(1);
    expect(statuses.filter((s) => s === 409)).toHaveLength(9);
  });

  it.each([
    ["an empty list", { organizations: [] }, /organizations/],
    [
      "more than 100 entries",
      { organizations: Array.from({ length: 101 }, (_, i) => ({ name: `n${i}` })) },
      /at most 100/,
    ],
    ["a blank name", { organizations: [{ name: "   " }] }, /name/],
    ["a name over 100 characters", { organizations: [{ name: "x".repeat(101) }] }, /100/],
    ["a non-boolean active", { organizations: [{ name: "A", active: "yes" }] }, /active/],
    ["an unknown field", { organizations: [{ name: "A", colour: "red" }] }, /colour/],
    ["an unknown top-level field", { organizations: [{ name: "A" }], extra: 1 }, /extra/],
    ["a missing organizations list", {}, /organizations/],
    ["an array body", [], /expected object|Invalid input/],
  ])("answers 400 for %s", async (_, body, pattern) => {
    await expectError(await post(h, uniqueProduct(), body), 400, pattern);
  });

  it("answers 400 for a NUL character in a name", async () => {
    await expectError(
      await post(h, uniqueProduct(), { organizations: [{ name: "Ac\u0000me" }] }),
      400,
      /NUL character/,
    );
  });

  it("answers 400 for malformed JSON", async () => {
    await expectError(await post(h, uniqueProduct(), "{ not json"), 400, /Malformed JSON/);
  });

  it("answers 400 for a product id outside the allowed characters", async () => {
    await expectError(await post(h, "bad product!", { organizations: [{ name: "A" }] }), 400, /productId/);
    await expectError(await post(h, "x".repeat(65), { organizations: [{ name: "A" }] }), 400, /productId/);
  });

  it("answers 415 when the body is not JSON", async () => {
    const response = await h.app.request(`/api/v1/onboarding/organizations/${uniqueProduct()}`, {
      method: "POST",
      headers: { "content-type": "text/plain" },
      body: "name=Acme",
    });
    await expectError(response, 415, /application\/json/);
  });

  it("answers 413 for a body over 64 KiB", async () => {
    const body = JSON.stringify({ organizations: [{ name: "A", padding: "x".repeat(70_000) }] });
    await expectError(await post(h, uniqueProduct(), body), 413, /64 KiB/);
  });

  describe("when ONBOARDING_TOKEN is set", () => {
    it("answers 401 without the bearer token", async () => {
      await expectError(
        await post(guarded, uniqueProduct(), { organizations: [{ name: "A" }] }),
        401,
        /onboarding token/,
      );
    });

    it("answers 401 with a wrong token", async () => {
      const response = await post(
        guarded,
        uniqueProduct(),
        { organizations: [{ name: "A" }] },
        { authorization: "Bearer wrong-token-value" },
      );
      await expectError(response, 401, /onboarding token/);
    });

    it("creates organizations with the right token", async () => {
      const response = await post(
        guarded,
        uniqueProduct(),
        { organizations: [{ name: "A" }] },
        { authorization: "Bearer s3cret-onboarding-token" },
      );
      expect(response.status).toBe(201);
    });
  });
});
