import type { SenderClaim } from "../domain/senders.js";
import { senderKey } from "../store/senders.js";

/**
 * Whether an organization may send as what its message claims: the accept path's check
 * (docs/decisions/0033). Built once per API process.
 */
export interface VerifiedSenders {
  /** Sender verification is on (`SENDER_VERIFICATION=required`). */
  readonly required: boolean;
  /**
   * Why the organization may not send as `claim`, or undefined when it may (or when verification
   * is off, or the message claims nothing that needs verifying).
   */
  refusal(organizationId: string, claim: SenderClaim | undefined): Promise<string | undefined>;
  /** Drops what this process remembers of the organization's senders (after it changed them). */
  forget(organizationId: string): void;
}

const MAX_CACHED_ORGANIZATIONS = 10_000;

/**
 * The check, with each organization's verified senders cached for `ttlMs` (`AUTH_CACHE_TTL_MS`,
 * as API keys are: decision 0017), and the requests that miss the cache together sharing one
 * lookup. A change made through this process is seen at once (`forget`); one made through another
 * process, or by the operator's command, within `ttlMs`.
 */
export function createVerifiedSenders(deps: {
  /** The organization's verified senders as `senderKey`s (`verifiedSenderKeys` of the store). */
  load: (organizationId: string) => Promise<string[]>;
  now: () => Date;
  ttlMs: number;
  required: boolean;
}): VerifiedSenders {
  const { ttlMs } = deps;
  const cache = new Map<string, { keys: ReadonlySet<string>; expiresAt: number }>();
  const inFlight = new Map<string, Promise<ReadonlySet<string>>>();

  function verifiedOf(organizationId: string): ReadonlySet<string> | Promise<ReadonlySet<string>> {
    const now = deps.now().getTime();
    const cached = cache.get(organizationId);
    if (cached && cached.expiresAt > now) return cached.keys;
    const waiting = inFlight.get(organizationId);
    if (waiting) return waiting;
    const pending: Promise<ReadonlySet<string>> = deps
      .load(organizationId)
      .then((keys) => {
        const set = new Set(keys);
        // A `forget` while this lookup ran makes its answer stale: used once, not kept.
        if (inFlight.get(organizationId) === pending && ttlMs > 0) {
          if (cache.size >= MAX_CACHED_ORGANIZATIONS) cache.clear();
          cache.set(organizationId, { keys: set, expiresAt: now + ttlMs });
        }
        return set;
      })
      .finally(() => {
        if (inFlight.get(organizationId) === pending) inFlight.delete(organizationId);
      });
    inFlight.set(organizationId, pending);
    return pending;
  }

  return {
    required: deps.required,
    async refusal(organizationId, claim) {
      if (!deps.required || claim === undefined) return undefined;
      const verified = await verifiedOf(organizationId);
      if (verified.has(senderKey(claim.kind, claim.value))) return undefined;
      const how =
        claim.kind === "email_domain"
          ? "register it with POST /api/v1/senders/domains and publish its TXT record"
          : "register it with POST /api/v1/senders/sms for an operator to approve";
      return `${claim.described} is not verified for this organization; ${how}`;
    },
    forget(organizationId) {
      cache.delete(organizationId);
      inFlight.delete(organizationId);
    },
  };
}
