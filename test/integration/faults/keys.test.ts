import { spawn } from "node:child_process";
import { randomBytes, randomUUID } from "node:crypto";
import { join } from "node:path";
import { v7 as uuidv7 } from "uuid";
import { afterAll, describe, expect, inject, it } from "vitest";
import { apiKeys } from "../../../db/schema.js";
import { createApp } from "../../../src/api/app.js";
import { revokeApiKey } from "../../../src/store/organizations.js";
import { createHarness, eventually, type Harness, onboard } from "../../support/harness.js";

/**
 * Key rotation and revocation with the admin command (`npm run keys`, built: dist/scripts/keys.js),
 * checked through the API: a rotated key works at once, a revoked one gets 401 once the key cache
 * (AUTH_CACHE_TTL_MS) has expired.
 */
const root = join(import.meta.dirname, "..", "..", "..");
const h = createHarness({ AUTH_CACHE_TTL_MS: "0" });
const cached = createHarness({ AUTH_CACHE_TTL_MS: "400" });

afterAll(async () => {
  await Promise.all([h.close(), cached.close()]);
});

function keys(...args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [join(root, "dist/scripts/keys.js"), ...args], {
      cwd: root,
      env: { ...process.env, DATABASE_URL: inject("databaseUrl") },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (chunk: Buffer) => {
      stdout += chunk.toString();
    });
    child.stderr.on("data", (chunk: Buffer) => {
      stderr += chunk.toString();
    });
    const timer = setTimeout(() => child.kill("SIGKILL"), 20_000);
    child.on("exit", (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

async function statusWith(harness: Harness, organization: { id: string; productId: string }, apiKey: string) {
  const response = await harness.app.request(
    `/api/v1/onboarding/product/${organization.productId}/organization/${organization.id}`,
    { headers: { "x-api-key": apiKey } },
  );
  return response.status;
}

describe("npm run keys -- rotate", () => {
  it("issues a new key, printed once and alone on stdout; it works at once and the old one still does", async () => {
    const organization = await onboard(h);
    const rotated = await keys("rotate", organization.id);
    expect(rotated.code, rotated.stderr).toBe(0);
    const newKey = rotated.stdout.trim();
    expect(newKey).toMatch(/^ntf_[A-Za-z0-9_-]{43}$/);
    expect(rotated.stderr).toContain("shown this once");
    expect(rotated.stderr).toContain(organization.apiKey.slice(0, 12));
    expect(rotated.stderr).not.toContain(organization.apiKey);

    expect(await statusWith(h, organization, newKey)).toBe(200);
    expect(await statusWith(h, organization, organization.apiKey)).toBe(200);
    const stored = await h.sql`select key_hash from api_keys where organization_id = ${organization.id}`;
    expect(JSON.stringify(stored)).not.toContain(newKey);
  });

  it("with --revoke-old, the organization's other keys stop working", async () => {
    const organization = await onboard(h);
    const rotated = await keys("rotate", organization.id, "--revoke-old");
    expect(rotated.code, rotated.stderr).toBe(0);
    expect(await statusWith(h, organization, rotated.stdout.trim())).toBe(200);
    expect(await statusWith(h, organization, organization.apiKey)).toBe(401);
  });

  it("refuses an unknown organization (exit 1) and a malformed one (exit 2)", async () => {
    expect((await keys("rotate", randomUUID())).code).toBe(1);
    const malformed = await keys("rotate", "not-a-uuid");
    expect(malformed.code).toBe(2);
    expect(malformed.stderr).toContain("usage:");
    expect((await keys("frobnicate", randomUUID())).code).toBe(2);
  });
});

describe("npm run keys -- revoke", () => {
  it("revokes by key prefix: 401 from then on, with the same body as an unknown key", async () => {
    const organization = await onboard(h);
    const rotated = await keys("rotate", organization.id);
    const newKey = rotated.stdout.trim();
    const revoked = await keys("revoke", organization.apiKey.slice(0, 12));
    expect(revoked.code, revoked.stderr).toBe(0);
    expect(revoked.stdout).toContain("revoked");

    const refused = await h.app.request(
      `/api/v1/onboarding/product/${organization.productId}/organization/${organization.id}`,
      { headers: { "x-api-key": organization.apiKey } },
    );
    const unknown = await h.app.request(
      `/api/v1/onboarding/product/${organization.productId}/organization/${organization.id}`,
      { headers: { "x-api-key": `ntf_${randomBytes(32).toString("base64url")}` } },
    );
    expect(refused.status).toBe(401);
    expect(await refused.text()).toBe(await unknown.text());
    expect(await statusWith(h, organization, newKey)).toBe(200);

    const send = await h.app.request("/api/v1/notifications/sms?dry_run=true", {
      method: "POST",
      headers: { "content-type": "application/json", "x-api-key": organization.apiKey },
      body: JSON.stringify({ payload: { to: "+14155550100", body: "hi" } }),
    });
    expect(send.status).toBe(401);
  });

  it("revokes by key id and by the key itself; a second revoke changes nothing", async () => {
    const organization = await onboard(h);
    const [row] = await h.sql<
      { id: string }[]
    >`select id from api_keys where organization_id = ${organization.id}`;
    const byId = await keys("revoke", row?.id ?? "");
    expect(byId.code, byId.stderr).toBe(0);
    expect(await statusWith(h, organization, organization.apiKey)).toBe(401);
    const again = await keys("revoke", organization.apiKey);
    expect(again.code).toBe(0);
    expect(again.stdout).toContain("already revoked");
  });

  it("refuses an unknown key (exit 1) and an argument that names no key (exit 2)", async () => {
    expect((await keys("revoke", randomUUID())).code).toBe(1);
    expect((await keys("revoke", "hello")).code).toBe(2);
  });

  it("refuses a prefix two live keys share, naming them, and revokes neither", async () => {
    const organization = await onboard(h);
    const prefix = "ntf_Zz9-";
    const ids = [uuidv7(), uuidv7()];
    await h.db.insert(apiKeys).values(
      ids.map((id) => ({
        id,
        organizationId: organization.id,
        keyHash: randomBytes(32).toString("hex"),
        keyPrefix: prefix,
      })),
    );
    const result = await h.db.transaction((tx) => revokeApiKey(tx, { keyPrefix: prefix }));
    expect(result.outcome).toBe("ambiguous");
    const cli = await keys("revoke", prefix);
    expect(cli.code).toBe(1);
    for (const id of ids) expect(cli.stderr).toContain(id);
    const live = await h.sql`select id from api_keys where key_prefix = ${prefix} and revoked_at is null`;
    expect(live).toHaveLength(2);
  });
});

describe("a revoked key and the key cache", () => {
  it("keeps working at most AUTH_CACHE_TTL_MS after it is revoked", async () => {
    const organization = await onboard(cached);
    expect(await statusWith(cached, organization, organization.apiKey)).toBe(200);
    const revokedAt = Date.now();
    const result = await keys("revoke", organization.apiKey.slice(0, 12));
    expect(result.code, result.stderr).toBe(0);
    await eventually(
      async () => ((await statusWith(cached, organization, organization.apiKey)) === 401 ? true : undefined),
      3000,
      "the revoked key to be refused",
    );
    // The cached lookup expires 400 ms after it was made, which was before the revocation.
    expect(Date.now() - revokedAt).toBeLessThan(400 + 1500);
  });

  it("looks a key up once for the requests that miss the cache together", async () => {
    const organization = await onboard(cached);
    let lookups = 0;
    // The real database, counting the queries the app builds on it (the key lookup is the only
    // one a dry run makes).
    const db = new Proxy(cached.deps.db, {
      get(target, property, receiver) {
        if (property === "select") lookups++;
        return Reflect.get(target, property, receiver);
      },
    });
    const app = createApp({ ...cached.deps, db });
    const dryRun = () =>
      app.request("/api/v1/notifications/sms?dry_run=true", {
        method: "POST",
        headers: { "content-type": "application/json", "x-api-key": organization.apiKey },
        body: JSON.stringify({ payload: { to: "+14155550100", body: "once" } }),
      });
    const statuses = await Promise.all(Array.from({ length: 20 }, dryRun));
    expect(statuses.map((r) => r.status)).toEqual(Array(20).fill(200));
    expect(lookups).toBe(1);
    // Within AUTH_CACHE_TTL_MS the next one needs no lookup at all.
    expect((await dryRun()).status).toBe(200);
    expect(lookups).toBe(1);
  });
});
