import type { MiddlewareHandler } from "hono";
import { ApiError } from "../../http/errors.js";
import { requestHeader } from "../../http/node-request.js";
import { hashApiKey } from "../../runtime/api-keys.js";
import { findKeyOwner, type KeyOwner } from "../../store/organizations.js";
import type { AppDeps, AppEnv } from "../types.js";

const INVALID_KEY = "Missing or invalid API key";
const KEY_SHAPE = /^ntf_[A-Za-z0-9_-]{43}$/;
const MAX_CACHED_KEYS = 10_000;

/**
 * Resolves `x-api-key` to its organization. Missing, malformed, unknown and revoked keys all get
 * the same 401; a key of an inactive organization gets 403. Lookups are cached for
 * `AUTH_CACHE_TTL_MS`, which is therefore how long a revoked key may keep working. Requests that
 * miss the cache together share one lookup, so a busy key's expiry costs one query, not one per
 * request in flight.
 */
export function apiKeyAuth(deps: Pick<AppDeps, "db" | "config" | "now">): MiddlewareHandler<AppEnv> {
  const ttlMs = deps.config.AUTH_CACHE_TTL_MS;
  const cache = new Map<string, { owner: KeyOwner; expiresAt: number }>();
  const inFlight = new Map<string, Promise<KeyOwner | undefined>>();

  async function lookup(hash: string): Promise<KeyOwner | undefined> {
    const now = deps.now().getTime();
    const cached = cache.get(hash);
    if (cached && cached.expiresAt > now) return cached.owner;
    let pending = inFlight.get(hash);
    if (!pending) {
      pending = findKeyOwner(deps.db, hash)
        .then((owner) => {
          if (owner && ttlMs > 0) {
            if (cache.size >= MAX_CACHED_KEYS) cache.clear();
            cache.set(hash, { owner, expiresAt: now + ttlMs });
          } else {
            cache.delete(hash);
          }
          return owner;
        })
        .finally(() => inFlight.delete(hash));
      inFlight.set(hash, pending);
    }
    return pending;
  }

  return async function authenticateApiKey(c, next) {
    const raw = requestHeader(c, "x-api-key");
    if (!raw || !KEY_SHAPE.test(raw)) throw new ApiError(401, INVALID_KEY);
    const owner = await lookup(hashApiKey(raw));
    if (!owner) throw new ApiError(401, INVALID_KEY);
    if (!owner.active) throw new ApiError(403, "Organization is inactive");
    c.set("organization", owner);
    await next();
  };
}
