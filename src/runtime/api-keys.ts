import { createHash, hash, randomBytes, timingSafeEqual } from "node:crypto";

/** A new raw key: a readable prefix and 32 random bytes, base64url. Shown once, never stored. */
export function generateApiKey(prefix: "ntf_" | "enc_"): string {
  return prefix + randomBytes(32).toString("base64url");
}

/** What is stored and looked up: SHA-256 of the raw key, hex. */
export function hashApiKey(rawKey: string): string {
  // One-shot `hash` (Node 20.12): half the cost of createHash, and this runs on every request.
  return hash("sha256", rawKey, "hex");
}

export const KEY_PREFIX_LENGTH = 12;

/** The part of a key safe to show in listings and logs. */
export function keyPrefix(rawKey: string): string {
  // "ntf_" and 8 random characters: unlikely to collide, and still nothing worth guessing.
  return rawKey.slice(0, KEY_PREFIX_LENGTH);
}

/** Compares two secrets in constant time (for bearer tokens and passwords). */
export function secretsEqual(a: string, b: string): boolean {
  const left = createHash("sha256").update(a).digest();
  const right = createHash("sha256").update(b).digest();
  return timingSafeEqual(left, right);
}
