import { randomBytes } from "node:crypto";
import type { Executor } from "../../db/client.js";
import {
  type SenderKind,
  txtRecordsProve,
  VERIFICATION_TOKEN_PREFIX,
  verificationRecordName,
} from "../domain/senders.js";
import type { TxtResolver } from "../runtime/dns.js";
import { countSenders, createSender, findSender, markVerified, type Sender } from "../store/senders.js";

/** Use cases of an organization's senders (docs/decisions/0033). */

export interface SenderDeps {
  db: Executor;
  now: () => Date;
  newId: () => string;
}

/** A new, random proof of control of a domain: what its TXT record must say. */
export function newVerificationToken(): string {
  return `${VERIFICATION_TOKEN_PREFIX}${randomBytes(24).toString("base64url")}`;
}

export type SenderRegistration =
  | { outcome: "registered"; sender: Sender }
  /** The organization already has it. */
  | { outcome: "exists" }
  /** The organization has `maxSenders` senders already. */
  | { outcome: "full" };

/**
 * Registers an e-mail domain (with its token) or an SMS sender, pending, unless the organization
 * already has it or already has `maxSenders` senders. (Registrations of one organization at the
 * same instant may pass the cap by as many as are in flight: it bounds a list, it is no quota.)
 */
export async function registerSender(
  deps: SenderDeps & { maxSenders: number },
  organizationId: string,
  kind: SenderKind,
  value: string,
): Promise<SenderRegistration> {
  if ((await countSenders(deps.db, organizationId)) >= deps.maxSenders) return { outcome: "full" };
  const sender = await createSender(deps.db, {
    id: deps.newId(),
    organizationId,
    kind,
    value,
    verificationToken: kind === "email_domain" ? newVerificationToken() : null,
    createdAt: deps.now(),
  });
  return sender ? { outcome: "registered", sender } : { outcome: "exists" };
}

export type DomainVerification =
  | { outcome: "not_found" }
  | { outcome: "verified"; sender: Sender }
  /** The TXT records at `name` (each joined), none of which is the token. */
  | { outcome: "not_proven"; sender: Sender; name: string; found: string[] };

/**
 * Looks the domain's TXT record up now and marks the domain verified when it holds the token. A
 * domain already verified stays so without a look-up. Rejects with a `DnsLookupError` when DNS
 * gives no answer.
 */
export async function verifyDomain(
  deps: Omit<SenderDeps, "newId"> & { resolver: TxtResolver },
  organizationId: string,
  senderId: string,
): Promise<DomainVerification> {
  const sender = await findSender(deps.db, organizationId, senderId);
  if (sender?.kind !== "email_domain" || sender.verificationToken === null) return { outcome: "not_found" };
  if (sender.status === "verified") return { outcome: "verified", sender };
  const name = verificationRecordName(sender.value);
  const records = await deps.resolver.resolveTxt(name);
  if (!txtRecordsProve(records, sender.verificationToken)) {
    return { outcome: "not_proven", sender, name, found: records.map((chunks) => chunks.join("")) };
  }
  const verified = await markVerified(deps.db, sender.id, deps.now(), organizationId);
  // Deleted while DNS was asked: as unknown as it is now.
  return verified ? { outcome: "verified", sender: verified } : { outcome: "not_found" };
}
