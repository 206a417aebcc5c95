import { createDatabase } from "../db/client.js";
import {
  type ApiKeyInfo,
  findOrganization,
  issueApiKey,
  type KeySelector,
  listApiKeys,
  revokeApiKey,
} from "../src/store/organizations.js";
import { Refused, runCommand, UsageError } from "./cli.js";

/**
 * `npm run keys -- <command>`: API key administration (production: `node dist/scripts/keys.js`).
 *
 *   rotate <organization_id> [--revoke-old]   issue a new key; prints it once, alone on stdout
 *   revoke <key_id | key_prefix | api_key>    revoke one key (web processes refuse it within AUTH_CACHE_TTL_MS)
 *   list <organization_id>                    the organization's keys (prefixes only)
 *
 * Only DATABASE_URL is read. Exit status: 0 done, 1 refused (unknown, ambiguous), 2 usage.
 */
const USAGE = `usage:
  npm run keys -- rotate <organization_id> [--revoke-old]
  npm run keys -- revoke <key_id | key_prefix | api_key>
  npm run keys -- list <organization_id>`;

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const PREFIX = /^ntf_[A-Za-z0-9_-]{4,8}$/; // 8 since keys show 12 characters; 4 for older keys
const RAW_KEY = /^ntf_[A-Za-z0-9_-]{43}$/;

function describe(key: ApiKeyInfo): string {
  const state = key.revokedAt ? `revoked ${key.revokedAt.toISOString()}` : "live";
  return `${key.id}  ${key.keyPrefix}…  created ${key.createdAt.toISOString()}  ${state}`;
}

function selectorOf(value: string): KeySelector {
  if (UUID.test(value)) return { keyId: value.toLowerCase() };
  if (RAW_KEY.test(value)) return { rawKey: value };
  if (PREFIX.test(value)) return { keyPrefix: value };
  throw new UsageError(
    `"${value.slice(0, 12)}" is neither a key id (UUID), a key prefix (ntf_ + up to 8 characters) nor an API key`,
  );
}

function organizationIdOf(value: string | undefined): string {
  if (!value || !UUID.test(value)) throw new UsageError("an organization id (UUID) is required");
  return value.toLowerCase();
}

async function run(args: string[], databaseUrl: string): Promise<void> {
  const [command, target, ...rest] = args;
  const flags = new Set(rest);
  for (const flag of flags) {
    if (command !== "rotate" || flag !== "--revoke-old") throw new UsageError(`unknown argument ${flag}`);
  }
  if (command !== "rotate" && command !== "revoke" && command !== "list") {
    throw new UsageError(command ? `unknown command ${command}` : "a command is required");
  }
  if (!target) throw new UsageError(`${command} needs an argument`);
  const organizationId = command === "revoke" ? "" : organizationIdOf(target);
  const selector = command === "revoke" ? selectorOf(target) : undefined;

  const { db, sql } = createDatabase({ url: databaseUrl, poolSize: 1, connectTimeoutSeconds: 5 });
  try {
    if (command === "list") {
      const organization = await findOrganization(db, organizationId);
      if (!organization) throw new Refused(`no organization ${organizationId}`);
      const keys = await listApiKeys(db, organizationId);
      console.error(`keys of ${organization.name} (${organization.id}, product ${organization.productId}):`);
      for (const key of keys) console.log(describe(key));
      return;
    }

    if (command === "rotate") {
      const issued = await db.transaction((tx) =>
        issueApiKey(tx, organizationId, { revokeOthers: flags.has("--revoke-old") }),
      );
      if (!issued) throw new Refused(`no organization ${organizationId}`);
      console.error(
        `new API key for organization ${organizationId}: it is shown this once (only its hash is stored)`,
      );
      console.log(issued.apiKey);
      console.error(`key id ${issued.key.id}, prefix ${issued.key.keyPrefix}…`);
      for (const key of issued.revoked) console.error(`revoked ${describe(key)}`);
      const others = (await listApiKeys(db, organizationId)).filter(
        (key) => key.revokedAt === null && key.id !== issued.key.id,
      );
      if (others.length > 0) {
        console.error("still live (revoke once clients use the new key: npm run keys -- revoke <key id>):");
        for (const key of others) console.error(`  ${describe(key)}`);
      }
      return;
    }

    if (!selector) throw new UsageError("a key is required");
    const result = await db.transaction((tx) => revokeApiKey(tx, selector));
    switch (result.outcome) {
      case "revoked":
        console.log(`revoked ${describe(result.key)}`);
        console.error(
          "web processes refuse it once their key cache expires (AUTH_CACHE_TTL_MS, default 5 s)",
        );
        return;
      case "already_revoked":
        console.log(`already revoked: ${describe(result.key)}`);
        return;
      case "not_found":
        throw new Refused(`no key matches ${target.slice(0, 12)}`);
      case "ambiguous":
        throw new Refused(
          `several keys start with ${target}; revoke one by its id:\n  ${result.keys.map(describe).join("\n  ")}`,
        );
    }
  } finally {
    await sql.end({ timeout: 5 });
  }
}

runCommand("keys", USAGE, run);
