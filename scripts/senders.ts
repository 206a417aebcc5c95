import { createDatabase } from "../db/client.js";
import { findOrganization } from "../src/store/organizations.js";
import {
  deleteSender,
  findSenderById,
  listPendingSenders,
  listSenders,
  markVerified,
  type Sender,
} from "../src/store/senders.js";
import { Refused, runCommand, UsageError } from "./cli.js";

/**
 * `npm run senders -- <command>`: the operator's review of SMS sender ids (production:
 * `node dist/scripts/senders.js`; docs/decisions/0033). No DNS proves who may send as `BANK`,
 * so an organization registers it (`POST /api/v1/senders/sms`) and an operator, having checked
 * the organization's right to it, approves it here.
 *
 *   pending                      SMS senders awaiting approval, oldest first
 *   approve <sender_id>          approve one (web processes accept it within AUTH_CACHE_TTL_MS)
 *   reject <sender_id>           delete one (pending or approved); the organization may register it again
 *   list <organization_id>       every sender of an organization, e-mail domains included
 *
 * E-mail domains are verified by their DNS record only: `approve` refuses them.
 * Only DATABASE_URL is read. Exit status: 0 done, 1 refused (unknown, a domain), 2 usage.
 */
const USAGE = `usage:
  npm run senders -- pending
  npm run senders -- approve <sender_id>
  npm run senders -- reject <sender_id>
  npm run senders -- list <organization_id>`;

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const COMMANDS = ["pending", "approve", "reject", "list"] as const;

function describe(sender: Sender): string {
  const verified = sender.verifiedAt ? ` ${sender.verifiedAt.toISOString()}` : "";
  return `${sender.id}  ${sender.kind}  ${JSON.stringify(sender.value)}  ${sender.status}${verified}  organization ${sender.organizationId}`;
}

async function run(args: string[], databaseUrl: string): Promise<void> {
  const [command, target, ...rest] = args;
  if (!COMMANDS.includes(command as (typeof COMMANDS)[number]))
    throw new UsageError(command ? `unknown command ${command}` : "a command is required");
  if (rest.length > 0) throw new UsageError(`unknown argument ${rest[0]}`);
  if (command === "pending" ? target !== undefined : !target || !UUID.test(target))
    throw new UsageError(
      command === "pending" ? `unknown argument ${target}` : `${command} needs an id (UUID)`,
    );
  const id = target?.toLowerCase() ?? "";

  const { db, sql } = createDatabase({ url: databaseUrl, poolSize: 1, connectTimeoutSeconds: 5 });
  try {
    switch (command) {
      case "pending": {
        const pending = await listPendingSenders(db, "sms_sender");
        for (const sender of pending) {
          console.log(`${describe(sender)} (${sender.organizationName}, product ${sender.productId})`);
        }
        if (pending.length === 0) console.error("no SMS sender awaits approval");
        return;
      }
      case "list": {
        const organization = await findOrganization(db, id);
        if (!organization) throw new Refused(`no organization ${id}`);
        console.error(
          `senders of ${organization.name} (${organization.id}, product ${organization.productId}):`,
        );
        for (const sender of await listSenders(db, id)) console.log(describe(sender));
        return;
      }
      case "approve": {
        const sender = await findSenderById(db, id);
        if (!sender) throw new Refused(`no sender ${id}`);
        if (sender.kind !== "sms_sender")
          throw new Refused(`${sender.value} is an e-mail domain: only its DNS record verifies it`);
        const approved = await markVerified(db, id, new Date());
        if (!approved) throw new Refused(`no sender ${id}`);
        console.log(`approved ${describe(approved)}`);
        console.error(
          "web processes accept it once their sender cache expires (AUTH_CACHE_TTL_MS, default 5 s)",
        );
        return;
      }
      case "reject": {
        const sender = await findSenderById(db, id);
        if (!sender || !(await deleteSender(db, sender.organizationId, id)))
          throw new Refused(`no sender ${id}`);
        console.log(`deleted ${describe(sender)}`);
        return;
      }
    }
  } finally {
    await sql.end({ timeout: 5 });
  }
}

runCommand("senders", USAGE, run);
