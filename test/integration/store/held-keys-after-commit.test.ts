import { randomUUID } from "node:crypto";
import { inArray } from "drizzle-orm";
import { v7 as uuidv7 } from "uuid";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createDatabase } from "../../../db/client.js";
import { isDatabaseUnavailable } from "../../../db/errors.js";
import * as schema from "../../../db/schema.js";
import { type AcceptRequest, acceptMessage } from "../../../src/messages/accept.js";
import { createMessageStore, type MessageStore } from "../../../src/store/message-store.js";
import type { Organization } from "../../../src/store/organizations.js";
import { TcpProxy } from "../../faults/support/tcp-proxy.js";
import { testContentVault } from "../../support/content-keys.js";
import { createHarness, eventually, type Harness, onboard } from "../../support/harness.js";
import { createOwnDatabase } from "../../support/own-database.js";

/**
 * A batch of accepts is one statement; only the requests whose Idempotency-Key was already held
 * need a second one, a read of what those keys recorded. When that read fails after the first
 * statement committed, the committed messages are still accepted (and never written twice), and
 * only the requests that needed the read fail. The batcher runs here on a postgres.js client
 * behind a TCP proxy that holds each chunk a moment, so a test can act between the statements.
 * A database of this file's own: one test renames a table.
 */
const HELD_KEYS_READ = "from idempotency_keys k";

let own: Awaited<ReturnType<typeof createOwnDatabase>>;
let h: Harness;
let organization: Organization;

beforeAll(async () => {
  own = await createOwnDatabase("heldkeys");
  h = createHarness({ DATABASE_URL: own.url });
  const onboarded = await onboard(h);
  organization = { id: onboarded.id, productId: onboarded.productId, name: onboarded.name, active: true };
});

afterAll(async () => {
  await h?.close();
  await own?.drop();
});

/**
 * A database handle whose one connection goes through a proxy of its own (which holds each chunk
 * `latencyMs`); counts the batch statements it sends.
 */
async function throughProxy(latencyMs: number) {
  const proxy = await TcpProxy.start({ host: "127.0.0.1", port: 5432 });
  proxy.latencyMs = latencyMs;
  const url = new URL(own.url);
  url.port = String(proxy.port);
  let batchStatements = 0;
  const { sql: client } = createDatabase({
    url: url.toString(),
    poolSize: 1,
    onQuery: (query) => {
      if (query.includes("insert into idempotency_keys")) batchStatements++;
    },
  });
  return {
    store: createMessageStore({ sql: client, queuePrefix: "held-keys", content: testContentVault(client) }),
    proxy,
    get batchStatements() {
      return batchStatements;
    },
    async close() {
      await client.end({ timeout: 1 });
      await proxy.close();
    },
  };
}

function acceptVia(store: MessageStore, body: string, key?: string) {
  const request: AcceptRequest = {
    organization,
    content: { channel: "sms", recipient: "+14155550100", sender: "ACME", body },
    retryEnabled: true,
    notificationType: undefined,
    idempotencyKey: key,
  };
  return acceptMessage({ store, now: () => new Date(), newId: uuidv7 }, request);
}

/** One batch: three new messages, plus a replay and a conflicting reuse of a key an earlier message holds. */
async function batchNeedingTheHeldKeysRead(store: MessageStore) {
  const key = `held-${randomUUID()}`;
  const holder = await acceptVia(h.deps.store, "the first use of the key", key);
  expect(holder.outcome).toBe("accepted");
  const settled = Promise.allSettled([
    acceptVia(store, "new 1"),
    acceptVia(store, "new 2"),
    acceptVia(store, "new 3"),
    acceptVia(store, "the first use of the key", key),
    acceptVia(store, "another body for the key", key),
  ]);
  return settled;
}

/**
 * Starts the batch through the proxy and returns once its held-keys read is on its way, with the
 * batch's results still to come (wrapped, so that awaiting this does not await them).
 */
async function batchUntilTheHeldKeysRead(proxied: Awaited<ReturnType<typeof throughProxy>>) {
  const seen = proxied.proxy.watch([HELD_KEYS_READ]);
  const settled = batchNeedingTheHeldKeysRead(proxied.store);
  await eventually(async () => (seen.has(HELD_KEYS_READ) ? true : undefined), 10_000, "the held-keys read");
  return { settled };
}

/** The batch's three requests without a key committed: each is answered accepted. */
function expectTheNewMessagesAccepted(results: PromiseSettledResult<{ outcome: string }>[]) {
  expect(results.slice(0, 3).map((r) => r.status === "fulfilled" && r.value.outcome)).toEqual([
    "accepted",
    "accepted",
    "accepted",
  ]);
}

async function storedMessages(results: PromiseSettledResult<{ outcome: string; messageId?: string }>[]) {
  const ids = results.flatMap((r) =>
    r.status === "fulfilled" && r.value.messageId ? [r.value.messageId] : [],
  );
  const rows = await h.db
    .select({ id: schema.messages.messageId })
    .from(schema.messages)
    .where(inArray(schema.messages.messageId, ids));
  return { ids, stored: rows.length };
}

describe("given the read of held keys fails after the batch statement committed", () => {
  it("when the connection is reset between the two statements, then the committed messages are accepted and only the keyed requests fail", async () => {
    // Each chunk reaches Postgres 150 ms late: time to cut the connection once the read is on its way.
    const proxied = await throughProxy(150);
    try {
      const { settled } = await batchUntilTheHeldKeysRead(proxied);
      await proxied.proxy.cut("refuse", { reset: true });
      const results = await settled;

      expectTheNewMessagesAccepted(results);
      for (const keyed of results.slice(3)) {
        expect(keyed.status).toBe("rejected");
        // The web answers it 503 + Retry-After: the client retries with its key and gets its answer.
        expect(isDatabaseUnavailable((keyed as PromiseRejectedResult).reason)).toBe(true);
      }
      const { ids, stored } = await storedMessages(results);
      expect(stored).toBe(ids.length);
      expect(proxied.batchStatements).toBe(1);
    } finally {
      await proxied.close();
    }
  });

  it("when Postgres refuses the read, then the committed messages are accepted, not run again, and only the keyed requests fail", async () => {
    const proxied = await throughProxy(300);
    let moved = false;
    try {
      const { settled } = await batchUntilTheHeldKeysRead(proxied);
      // A migration renames the table between the two statements: the read meets 42P01 undefined_table.
      await h.sql`alter table idempotency_keys rename to idempotency_keys_moved`;
      moved = true;
      const results = await settled;

      expectTheNewMessagesAccepted(results);
      for (const keyed of results.slice(3)) {
        expect(keyed.status).toBe("rejected");
        expect((keyed as PromiseRejectedResult).reason).toMatchObject({ code: "42P01" });
      }
      const { ids, stored } = await storedMessages(results);
      expect(stored).toBe(ids.length);
      // Not re-run one by one: that would write the committed messages again (23505, a 500).
      expect(proxied.batchStatements).toBe(1);
    } finally {
      if (moved) await h.sql`alter table idempotency_keys_moved rename to idempotency_keys`;
      await proxied.close();
    }
  });
});
