import { and, eq, inArray, isNull, sql } from "drizzle-orm";
import { v7 as uuidv7 } from "uuid";
import type { Executor } from "../../db/client.js";
import { isUniqueViolation, postgresError } from "../../db/errors.js";
import { apiKeys, organizations } from "../../db/schema.js";
import { generateApiKey, hashApiKey, keyPrefix } from "../api-keys.js";

export interface Organization {
  id: string;
  productId: string;
  name: string;
  active: boolean;
}

export interface OnboardedOrganization extends Organization {
  apiKey: string;
}

export class DuplicateOrganizationError extends Error {
  constructor(readonly organizationName: string) {
    super(`an organization named "${organizationName}" already exists under this product`);
  }
}

/**
 * Creates organizations and one API key each, all or nothing. Run it inside a transaction:
 * a name already taken (case-insensitively) raises {@link DuplicateOrganizationError}.
 */
export async function createOrganizations(
  tx: Executor,
  productId: string,
  entries: ReadonlyArray<{ name: string; active: boolean }>,
): Promise<OnboardedOrganization[]> {
  const wanted = entries.map((entry) => entry.name.toLowerCase());
  const existing = await tx
    .select({ name: organizations.name })
    .from(organizations)
    .where(and(eq(organizations.productId, productId), inArray(sql`lower(${organizations.name})`, wanted)))
    .limit(1);
  if (existing[0]) throw new DuplicateOrganizationError(existing[0].name);

  const created = entries.map((entry) => ({
    id: uuidv7(),
    productId,
    name: entry.name,
    active: entry.active,
    apiKey: generateApiKey("ntf_"),
  }));
  try {
    await tx.insert(organizations).values(created.map(({ apiKey: _key, ...org }) => org));
  } catch (error) {
    // A concurrent request took the name between our check and our insert.
    if (isUniqueViolation(error)) {
      const detail = postgresError(error)?.detail ?? "";
      const lowered = /\)=\(.*?, (.*)\) already exists/.exec(detail)?.[1];
      throw new DuplicateOrganizationError(
        entries.find((e) => e.name.toLowerCase() === lowered)?.name ?? lowered ?? "",
      );
    }
    throw error;
  }
  await tx.insert(apiKeys).values(
    created.map((org) => ({
      id: uuidv7(),
      organizationId: org.id,
      keyHash: hashApiKey(org.apiKey),
      keyPrefix: keyPrefix(org.apiKey),
    })),
  );
  return created;
}

export interface KeyOwner extends Organization {
  keyId: string;
}

/** The organization a live (not revoked) key belongs to, looked up by the key's hash. */
export async function findKeyOwner(db: Executor, keyHash: string): Promise<KeyOwner | undefined> {
  const rows = await db
    .select({
      keyId: apiKeys.id,
      id: organizations.id,
      productId: organizations.productId,
      name: organizations.name,
      active: organizations.active,
    })
    .from(apiKeys)
    .innerJoin(organizations, eq(organizations.id, apiKeys.organizationId))
    .where(and(eq(apiKeys.keyHash, keyHash), isNull(apiKeys.revokedAt)))
    .limit(1);
  return rows[0];
}

export async function findOrganization(
  db: Executor,
  organizationId: string,
): Promise<Organization | undefined> {
  const rows = await db
    .select({
      id: organizations.id,
      productId: organizations.productId,
      name: organizations.name,
      active: organizations.active,
    })
    .from(organizations)
    .where(eq(organizations.id, organizationId))
    .limit(1);
  return rows[0];
}
