import { and, eq, inArray, isNull, sql } from "drizzle-orm";
import { v7 as uuidv7 } from "uuid";
import type { Executor } from "../../db/client.js";
import { isUniqueViolation, postgresError } from "../../db/errors.js";
import { apiKeys, organizations } from "../../db/schema.js";
import { generateApiKey, hashApiKey, keyPrefix } from "../runtime/api-keys.js";

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

export interface ApiKeyInfo {
  id: string;
  organizationId: string;
  keyPrefix: string;
  createdAt: Date;
  revokedAt: Date | null;
}

const apiKeyInfo = {
  id: apiKeys.id,
  organizationId: apiKeys.organizationId,
  keyPrefix: apiKeys.keyPrefix,
  createdAt: apiKeys.createdAt,
  revokedAt: apiKeys.revokedAt,
};

/** Every key of an organization, revoked ones included, oldest first. */
export async function listApiKeys(db: Executor, organizationId: string): Promise<ApiKeyInfo[]> {
  return db
    .select(apiKeyInfo)
    .from(apiKeys)
    .where(eq(apiKeys.organizationId, organizationId))
    .orderBy(apiKeys.createdAt, apiKeys.id);
}

/**
 * Issues a new key for an existing organization (rotation). Its other keys keep working until
 * they are revoked, so clients can switch over without downtime; `revokeOthers` revokes them in
 * the same transaction. Returns undefined when there is no such organization. The raw key is
 * returned once and never stored.
 */
export async function issueApiKey(
  tx: Executor,
  organizationId: string,
  options: { revokeOthers?: boolean; now?: Date } = {},
): Promise<{ key: ApiKeyInfo; apiKey: string; revoked: ApiKeyInfo[] } | undefined> {
  const organization = await findOrganization(tx, organizationId);
  if (!organization) return undefined;
  const now = options.now ?? new Date();
  const revoked = options.revokeOthers
    ? await tx
        .update(apiKeys)
        .set({ revokedAt: now })
        .where(and(eq(apiKeys.organizationId, organizationId), isNull(apiKeys.revokedAt)))
        .returning(apiKeyInfo)
    : [];
  const apiKey = generateApiKey("ntf_");
  const [key] = await tx
    .insert(apiKeys)
    .values({
      id: uuidv7(),
      organizationId,
      keyHash: hashApiKey(apiKey),
      keyPrefix: keyPrefix(apiKey),
      createdAt: now,
    })
    .returning(apiKeyInfo);
  if (!key) throw new Error("inserting the API key returned no row");
  return { key, apiKey, revoked };
}

/** How to name the key to revoke: its id, its prefix (`ntf_` + 8 characters; 4 for keys made before prefixes grew) or the raw key itself. */
export type KeySelector = { keyId: string } | { keyPrefix: string } | { rawKey: string };

export type RevokeResult =
  | { outcome: "revoked"; key: ApiKeyInfo }
  | { outcome: "already_revoked"; key: ApiKeyInfo }
  | { outcome: "not_found" }
  /** A prefix shared by several live keys: name the key by its id instead. */
  | { outcome: "ambiguous"; keys: ApiKeyInfo[] };

/**
 * Revokes one key: from then on it is refused (401) once each web process's key cache expires
 * (`AUTH_CACHE_TTL_MS`). Revoking a revoked key changes nothing.
 */
export async function revokeApiKey(
  tx: Executor,
  selector: KeySelector,
  now: Date = new Date(),
): Promise<RevokeResult> {
  const where =
    "keyId" in selector
      ? eq(apiKeys.id, selector.keyId)
      : "rawKey" in selector
        ? eq(apiKeys.keyHash, hashApiKey(selector.rawKey))
        : eq(apiKeys.keyPrefix, selector.keyPrefix);
  const matches = await tx.select(apiKeyInfo).from(apiKeys).where(where).limit(50);
  const live = matches.filter((key) => key.revokedAt === null);
  const [only] = live;
  if (live.length > 1) return { outcome: "ambiguous", keys: live };
  if (!only) {
    const [revoked] = matches;
    return revoked ? { outcome: "already_revoked", key: revoked } : { outcome: "not_found" };
  }
  const [key] = await tx
    .update(apiKeys)
    .set({ revokedAt: now })
    .where(and(eq(apiKeys.id, only.id), isNull(apiKeys.revokedAt)))
    .returning(apiKeyInfo);
  return key ? { outcome: "revoked", key } : { outcome: "already_revoked", key: only };
}
