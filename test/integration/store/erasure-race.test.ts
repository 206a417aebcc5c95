import { randomUUID } from "node:crypto";
import { v7 as uuidv7 } from "uuid";
import { afterAll, describe, expect, it } from "vitest";
import { initialState } from "../../../src/domain/state.js";
import { acceptMessage } from "../../../src/messages/accept.js";
import { type Keyring, keyringFromConfig } from "../../../src/runtime/content-crypto.js";
import { ContentVault } from "../../../src/store/content.js";
import { DataKeys } from "../../../src/store/data-keys.js";
import { appendEvents } from "../../../src/store/events.js";
import { createMessageStore } from "../../../src/store/message-store.js";
import { sealExistingContent } from "../../../src/store/seal-existing.js";
import { TEST_CONTENT_KEYS } from "../../support/content-keys.js";
import { createHarness, eventually, getMessage, onboard, sendSms } from "../../support/harness.js";

/**
 * An organization's erasure served by one process while another still has the organization's
 * data key cached (docs/decisions/0034): the other process must not seal new messages under the
 * destroyed key (answered 202, then rejected `content_erased`, unreadable). Two harnesses on one
 * database are the two processes: each has its own content vault, data-key cache and worker.
 */
const a = createHarness();
const b = createHarness();
afterAll(async () => {
  await Promise.all([a.close(), b.close()]);
});

const { keyring } = keyringFromConfig({ ...TEST_CONTENT_KEYS, CONTENT_PREVIOUS_MASTER_KEYS: undefined });

type Org = Awaited<ReturnType<typeof onboard>>;

const sms = (body: string) => ({ payload: { to: "+14155550142", body, sender: "ACME" } });

async function sendThrough(process: typeof a, org: Org, body: string): Promise<string> {
  const response = await sendSms(process, org.apiKey, sms(body));
  expect(response.status).toBe(202);
  return ((await response.json()) as { request_id: string }).request_id;
}

/** The data key a message's content is sealed under (the id in its `content_enc` header). */
async function sealingKeyOf(messageId: string): Promise<string> {
  const [row] = await a.sql<Array<{ key_id: string }>>`
    select encode(substring(content_enc from 2 for 16), 'hex') as key_id
    from message_events where message_id = ${messageId} and seq = 1`;
  const hex = row?.key_id ?? "";
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

async function keyRows(organizationId: string) {
  return a.sql<Array<{ id: string; live: boolean }>>`
    select id, wrapped_key is not null as live from organization_data_keys
    where organization_id = ${organizationId} order by created_at`;
}

async function erase(org: Org) {
  const response = await a.app.request(`/api/v1/organizations/${org.id}/data`, { method: "DELETE" });
  expect(response.status).toBe(200);
}

/** The message as its organization reads it through process A, once delivered or ended. */
async function finished(org: Org, id: string) {
  return eventually(async () => {
    const response = await getMessage(a, org.apiKey, id);
    const body = (await response.json()) as {
      status: string;
      reason?: string | null;
      payload: { message: string | null };
    };
    return ["success", "failed", "rejected"].includes(body.status) ? body : undefined;
  });
}

/** A keyring whose first unwrap waits until `release` is called; `reached` tells it has begun. */
function pausedKeyring(): { keyring: Keyring; reached: () => boolean; release: () => void } {
  let reached = false;
  let release = () => {};
  const gate = new Promise<void>((resolve) => {
    release = resolve;
  });
  return {
    keyring: {
      wrap: (dataKey, context) => keyring.wrap(dataKey, context),
      async unwrap(masterKeyId, wrapped, context) {
        if (!reached) {
          reached = true;
          await gate;
        }
        return keyring.unwrap(masterKeyId, wrapped, context);
      },
    },
    reached: () => reached,
    release: () => release(),
  };
}

describe("an organization erased through one process while another has its data key cached", () => {
  it("a send through the other process afterwards is sealed under a new key: 202, readable, delivered", async () => {
    const org = await onboard(a);
    const before = await sendThrough(b, org, "before the erasure");
    const destroyedKey = await sealingKeyOf(before);
    expect(b.deps.store.content.keys.cached(destroyedKey)).toMatchObject({ id: destroyedKey });

    await erase(org);
    // B's cache has not expired: it still holds the key A destroyed.
    expect(b.deps.store.content.keys.cached(destroyedKey)).toMatchObject({ id: destroyedKey });

    const after = await sendThrough(b, org, "after the erasure");
    b.startWorker();
    expect(await finished(org, after)).toMatchObject({
      status: "success",
      payload: { message: "after the erasure" },
    });
    expect(await finished(org, before)).toMatchObject({ status: "rejected", payload: { message: null } });

    const newKey = await sealingKeyOf(after);
    expect(newKey).not.toBe(destroyedKey);
    expect(await keyRows(org.id)).toEqual([
      { id: destroyedKey, live: false },
      { id: newKey, live: true },
    ]);
    // B learnt the key is gone: it opens nothing more with it.
    expect(b.deps.store.content.keys.cached(destroyedKey)).toBeNull();
  });

  it("a batch that meets a key an erasure is destroying waits for the erasure, then seals under a new key", async () => {
    const org = await onboard(a);
    const destroyedKey = await sealingKeyOf(await sendThrough(b, org, "caches the key in B"));
    const erasure = await a.sql.reserve();
    try {
      await erasure`begin`;
      await erasure`
        update organization_data_keys set wrapped_key = null, destroyed_at = now()
        where organization_id = ${org.id} and wrapped_key is not null`;
      const sending = sendThrough(b, org, "at the same instant");
      // B's accept statement waits on the key's row, which the erasure holds.
      await eventually(
        async () => {
          const [row] = await a.sql<Array<{ n: number }>>`
            select count(*)::int as n from pg_stat_activity
            where datname = current_database() and wait_event_type = 'Lock' and query like '%live_keys%'`;
          return row && row.n > 0 ? true : undefined;
        },
        10_000,
        "the accept waiting on the erasure",
      );
      await erasure`commit`;
      const id = await sending;
      expect(await sealingKeyOf(id)).not.toBe(destroyedKey);
      const response = await getMessage(a, org.apiKey, id);
      expect(await response.json()).toMatchObject({ payload: { message: "at the same instant" } });
    } finally {
      // Never back in the pool with the erasure's transaction open (when the test failed in it).
      await erasure`rollback`.catch(() => undefined);
      erasure.release();
    }
  });

  it("a key that B was loading while A destroyed it is refused at the accept, and the message sealed again", async () => {
    const org = await onboard(a);
    const destroyedKey = await sealingKeyOf(await sendThrough(a, org, "makes the key"));
    const paused = pausedKeyring();
    const store = createMessageStore({
      sql: b.sql,
      queuePrefix: `race-${randomUUID().slice(0, 8)}`,
      content: new ContentVault(new DataKeys(b.sql, paused.keyring)),
    });
    const accepting = acceptMessage(
      { store, now: () => new Date(), newId: uuidv7 },
      {
        organization: { id: org.id, productId: org.productId, name: org.name, active: true },
        content: { channel: "sms", recipient: "+14155550142", sender: "ACME", body: "loaded while erased" },
        retryEnabled: true,
        notificationType: undefined,
        idempotencyKey: `race-${randomUUID()}`,
      },
    );
    // B read the live key from the database and is unwrapping it when A destroys it.
    await eventually(async () => (paused.reached() ? true : undefined), 10_000, "B's key load");
    await erase(org);
    paused.release();
    const result = await accepting;
    expect(result.outcome).toBe("accepted");
    const id = (result as { messageId: string }).messageId;
    expect(await sealingKeyOf(id)).not.toBe(destroyedKey);
    const response = await getMessage(a, org.apiKey, id);
    expect(await response.json()).toMatchObject({ payload: { message: "loaded while erased" } });
    expect(store.content.keys.cached(destroyedKey)).toBeNull();
  });
});

describe("content:seal-existing in a process that has a destroyed key cached", () => {
  it("seals a message from before encryption under the organization's live key, not the destroyed one", async () => {
    const org = await onboard(a);
    const destroyedKey = await sealingKeyOf(await sendThrough(b, org, "caches the key in B"));
    await erase(org);
    const id = randomUUID();
    const now = new Date();
    // Written as the code before encryption wrote it: the whole content in the event's data.
    await appendEvents(a.sql, initialState, [
      {
        type: "accepted",
        retryCount: 0,
        occurredAt: now.toISOString(),
        data: {
          id,
          organizationId: org.id,
          productId: org.productId,
          channel: "sms",
          priority: "medium",
          notificationType: null,
          retryEnabled: true,
          recipient: "+14155550142",
          sender: "ACME",
          expiresAt: new Date(now.getTime() + 60_000).toISOString(),
          body: "from before encryption",
        },
      },
    ]);

    expect(await sealExistingContent(b.sql, b.deps.store.content)).toBeGreaterThanOrEqual(1);

    expect(await sealingKeyOf(id)).not.toBe(destroyedKey);
    const response = await getMessage(a, org.apiKey, id);
    expect(await response.json()).toMatchObject({ payload: { message: "from before encryption" } });
  });
});

describe("a key load in the process that destroys the key at the same time", () => {
  it("does not cache the destroyed key: the load reads again and gets the organization's new key", async () => {
    const org = await onboard(a);
    const destroyedKey = await sealingKeyOf(await sendThrough(a, org, "makes the key"));
    const paused = pausedKeyring();
    const keys = new DataKeys(a.sql, paused.keyring);
    const loading = keys.current(org.id);
    await eventually(async () => (paused.reached() ? true : undefined), 10_000, "the key load");
    expect(await keys.destroyAll(org.id)).toBe(1);
    paused.release();

    const key = await loading;
    expect(key.id).not.toBe(destroyedKey);
    expect(keys.cached(destroyedKey)).toBeNull();
    expect(keys.current(org.id)).toBe(key);
    expect(await keyRows(org.id)).toEqual([
      { id: destroyedKey, live: false },
      { id: key.id, live: true },
    ]);
  });

  it("does not cache as live a key read by id before its destruction", async () => {
    const org = await onboard(a);
    const destroyedKey = await sealingKeyOf(await sendThrough(a, org, "makes the key"));
    const paused = pausedKeyring();
    const keys = new DataKeys(a.sql, paused.keyring);
    const loading = keys.load([destroyedKey]);
    await eventually(async () => (paused.reached() ? true : undefined), 10_000, "the key load");
    await keys.destroyAll(org.id);
    paused.release();

    expect((await loading).get(destroyedKey)).toBeNull();
    expect(keys.cached(destroyedKey)).toBeNull();
  });
});
