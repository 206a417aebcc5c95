import { execFile } from "node:child_process";
import { createECDH, randomUUID } from "node:crypto";
import { promisify } from "node:util";
import { asc, eq } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { messages } from "../../../db/schema.js";
import type { SmsMessage, SmsProvider } from "../../../src/channels/sms/providers/provider.js";
import { SimulatorSmsProvider } from "../../../src/channels/sms/providers/simulator.js";
import { initialState } from "../../../src/domain/state.js";
import { UnreadableContentError } from "../../../src/runtime/content-crypto.js";
import { createContentVault } from "../../../src/store/content.js";
import { appendEvents } from "../../../src/store/events.js";
import { rebuildProjections } from "../../../src/store/rebuild.js";
import { sealExistingContent } from "../../../src/store/seal-existing.js";
import { TEST_MASTER_KEY } from "../../support/content-keys.js";
import {
  createHarness,
  createTemplate,
  eventually,
  expectError,
  getMessage,
  onboard,
  sendNotification,
  sendSms,
} from "../../support/harness.js";

const h = createHarness();
afterAll(() => h.close());

/** Every SMS the worker handed to the provider. */
const sent: SmsMessage[] = [];
const simulator = new SimulatorSmsProvider();
const recordingSms: SmsProvider = {
  name: simulator.name,
  send: (message) => {
    sent.push(message);
    return simulator.send(message);
  },
};

const PUSH_KEY = (() => {
  const ecdh = createECDH("prime256v1");
  ecdh.generateKeys();
  return ecdh.getPublicKey().toString("base64url");
})();

/** Distinctive text and recipients, to look for where they must not be. */
const tag = randomUUID().slice(0, 8);
const SECRETS = {
  smsBody: `Your code is ${tag}-481516`,
  phone: "+14155550123",
  emailTo: `ada-${tag}@example.com`,
  emailSubject: `Subject ${tag} about the loan`,
  mergeVar: `merge-${tag}-value`,
  pushTitle: `Title ${tag}`,
  pushBody: `Push body ${tag}`,
  pushAuth: `auth${tag}AAAAAAAAAAAAA`.slice(0, 22),
  pushEndpoint: `https://push.simulator.notify.test/ok-${tag}`,
};

type Org = Awaited<ReturnType<typeof onboard>>;

async function send(
  org: Org,
  channel: "sms" | "email" | "push",
  body: unknown,
  headers = {},
): Promise<string> {
  const response = await sendNotification(h, channel, org.apiKey, body, headers);
  expect(response.status).toBe(202);
  return ((await response.json()) as { request_id: string }).request_id;
}

const sms = (to: string, body: string) => ({ payload: { to, body, sender: "ACME" } });

function email(to: string) {
  return {
    payload: {
      template_name: "hello",
      message: {
        from_email: "news@acme.test",
        subject: SECRETS.emailSubject,
        to: [{ email: to }],
        global_merge_vars: [{ name: "NAME", content: SECRETS.mergeVar }],
      },
    },
  };
}

const push = {
  payload: {
    to: { endpoint: SECRETS.pushEndpoint, keys: { p256dh: PUSH_KEY, auth: SECRETS.pushAuth } },
    title: SECRETS.pushTitle,
    body: SECRETS.pushBody,
  },
};

async function record(org: Org, id: string) {
  const response = await getMessage(h, org.apiKey, id);
  expect(response.status).toBe(200);
  return (await response.json()) as {
    status: string;
    receiver_id: string | null;
    payload: {
      message: string | null;
      recipient: string | null;
      subject: string | null;
      template_fields: unknown;
    };
  };
}

async function finished(org: Org, id: string) {
  return eventually(async () => {
    const r = await record(org, id);
    return ["success", "failed", "rejected"].includes(r.status) ? r : undefined;
  });
}

/** Every row of the tables that may hold a message's content, as text. */
async function rowsAsText(ids: string[]): Promise<string> {
  const rows = await h.sql<Array<{ text: string }>>`
    select e::text as text from message_events e where e.message_id = any(${ids}::uuid[])
    union all select m::text from messages m where m.message_id = any(${ids}::uuid[])
    union all select k::text from idempotency_keys k where k.message_id = any(${ids}::uuid[])
    union all select o::text from delivery_outbox o where o.message_id = any(${ids}::uuid[])`;
  return rows.map((row) => row.text).join("\n");
}

function eventRows(ids: string[]) {
  return h.sql<Array<{ message_id: string; seq: number; type: string; content_enc: Buffer | null }>>`
    select message_id, seq, type, content_enc from message_events
    where message_id = any(${ids}::uuid[]) order by message_id, seq`;
}

function recordsOf(organizationId: string) {
  return h.db
    .select()
    .from(messages)
    .where(eq(messages.organizationId, organizationId))
    .orderBy(asc(messages.messageId));
}

let org: Org;
let ids: { sms: string; email: string; push: string };

beforeAll(async () => {
  h.startWorker({ providers: { sms: recordingSms } });
  org = await onboard(h);
  await createTemplate(h, org.apiKey, { name: "hello", code: "<p>Hello *|NAME|*</p>" });
  ids = {
    sms: await send(org, "sms", sms(SECRETS.phone, SECRETS.smsBody), { "Idempotency-Key": `otp-${tag}` }),
    email: await send(org, "email", email(SECRETS.emailTo)),
    push: await send(org, "push", push),
  };
  for (const id of Object.values(ids)) await finished(org, id);
});

describe("message content at rest", () => {
  it("given SMS, e-mail and push sent, then no row of theirs holds their text, recipients, merge variables or push keys", async () => {
    const text = await rowsAsText(Object.values(ids));
    expect(text).not.toBe("");
    for (const [name, secret] of Object.entries(SECRETS)) {
      expect(text.includes(secret), `${name} is stored in clear`).toBe(false);
    }
    const accepted = (await eventRows(Object.values(ids))).filter((row) => row.type === "accepted");
    expect(accepted).toHaveLength(3);
    for (const row of accepted) expect(row.content_enc?.length).toBeGreaterThan(17);
  });

  it("reads them back decrypted: the record shows the content, and the worker delivered it", async () => {
    const smsRecord = await record(org, ids.sms);
    expect(smsRecord).toMatchObject({
      status: "success",
      receiver_id: SECRETS.phone,
      payload: { message: SECRETS.smsBody, recipient: SECRETS.phone },
    });
    expect(sent.find((message) => message.messageId === ids.sms)).toMatchObject({
      to: SECRETS.phone,
      body: SECRETS.smsBody,
    });
    const emailRecord = await record(org, ids.email);
    expect(emailRecord.status).toBe("success");
    expect(emailRecord.payload.subject).toBe(SECRETS.emailSubject);
    expect(JSON.stringify(emailRecord.payload.template_fields)).toContain(SECRETS.mergeVar);
    const pushRecord = await record(org, ids.push);
    expect(pushRecord).toMatchObject({
      status: "success",
      receiver_id: SECRETS.pushEndpoint,
      payload: { message: SECRETS.pushBody, subject: SECRETS.pushTitle },
    });
  });

  it("given a database dump, then none of the text or recipients is in it", async () => {
    const url = new URL(h.config.DATABASE_URL);
    const { stdout } = await promisify(execFile)(
      "pg_dump",
      [
        "-h",
        url.hostname,
        "-p",
        url.port || "5432",
        "-U",
        url.username || "postgres",
        "--data-only",
        url.pathname.slice(1),
      ],
      { maxBuffer: 512 * 1024 * 1024 },
    );
    expect(stdout).toContain(ids.sms);
    for (const [name, secret] of Object.entries(SECRETS)) {
      expect(stdout.includes(secret), `${name} is in the dump`).toBe(false);
    }
  });

  it("keeps an Idempotency-Key's request hash keyed, not the plain SHA-256 of the request", async () => {
    const [row] = await h.sql<Array<{ request_hash: string }>>`
      select request_hash from idempotency_keys where message_id = ${ids.sms}`;
    expect(row?.request_hash).toMatch(/^[0-9a-f]{32}$/);
    // And the replay still works.
    const replay = await sendNotification(h, "sms", org.apiKey, sms(SECRETS.phone, SECRETS.smsBody), {
      "Idempotency-Key": `otp-${tag}`,
    });
    expect(replay.status).toBe(202);
    expect(((await replay.json()) as { request_id: string }).request_id).toBe(ids.sms);
  });

  it("given a sealed content moved to another message's row, then it does not open", async () => {
    const [a, b] = (await eventRows([ids.sms, ids.push])).filter((row) => row.type === "accepted");
    const opener = await h.deps.store.content.opener([a?.content_enc]);
    expect(opener.open(a?.content_enc ?? null, org.id, a?.message_id ?? "")).toMatchObject({
      recipient: SECRETS.phone,
    });
    expect(() => opener.open(a?.content_enc ?? null, org.id, b?.message_id ?? "")).toThrow(
      UnreadableContentError,
    );
  });

  it("given another master key, then the organization's data key does not unwrap", async () => {
    const [a] = (await eventRows([ids.sms])).filter((row) => row.type === "accepted");
    const other = createContentVault(h.sql, {
      CONTENT_MASTER_KEY: Buffer.alloc(32, 1).toString("base64"),
      CONTENT_MASTER_KEY_ID: "test",
      CONTENT_PREVIOUS_MASTER_KEYS: undefined,
      DATA_KEY_CACHE_TTL_MS: 0,
    });
    await expect(other.opener([a?.content_enc])).rejects.toThrow(UnreadableContentError);
  });
});

describe("erasing a recipient's content", () => {
  it("blanks that recipient's messages in events and records, keeps every row and event, and leaves the others", async () => {
    const other = await onboard(h);
    const target = "+14155550177";
    const erased = [
      await send(other, "sms", sms(target, `first ${tag}`), { "Idempotency-Key": `first-${tag}` }),
      await send(other, "sms", sms(` ${target}`, `second ${tag}`)),
    ];
    const kept = await send(other, "sms", sms("+14155550178", `kept ${tag}`), {
      "Idempotency-Key": `kept-${tag}`,
    });
    for (const id of [...erased, kept]) await finished(other, id);
    const eventsBefore = await eventRows([...erased, kept]);

    const response = await h.app.request("/api/v1/erasures", {
      method: "POST",
      headers: { "content-type": "application/json", "x-api-key": other.apiKey },
      body: JSON.stringify({ recipient: target }),
    });
    expect(response.status).toBe(200);
    expect(await response.json()).toEqual({ messages_erased: 2 });
    // Their Idempotency-Key claims (a keyed hash of the request) go with them; the others stay.
    const claims = await h.sql<Array<{ message_id: string }>>`
      select message_id from idempotency_keys where message_id = any(${[...erased, kept]}::uuid[])`;
    expect(claims.map((row) => row.message_id)).toEqual([kept]);

    for (const id of erased) {
      expect(await record(other, id)).toMatchObject({
        status: "success",
        receiver_id: null,
        payload: { message: null, recipient: null, subject: null, template_fields: null },
      });
    }
    expect((await record(other, kept)).payload.message).toBe(`kept ${tag}`);
    const eventsAfter = await eventRows([...erased, kept]);
    expect(eventsAfter.map(({ content_enc: _, ...e }) => e)).toEqual(
      eventsBefore.map(({ content_enc: _, ...e }) => e),
    );
    expect(
      eventsAfter
        .filter((e) => e.type === "accepted" && e.content_enc === null)
        .map((e) => e.message_id)
        .sort(),
    ).toEqual([...erased].sort());
    // The history still tells the whole story.
    const history = await h.app.request(`/api/v1/messages/${erased[0]}/events`, {
      headers: { "x-api-key": other.apiKey },
    });
    expect(((await history.json()) as { events: unknown[] }).events.length).toBeGreaterThanOrEqual(3);
    // Another organization's messages to the same recipient are not touched.
    const third = await onboard(h);
    const theirs = await send(third, "sms", sms(target, `theirs ${tag}`));
    await h.app.request("/api/v1/erasures", {
      method: "POST",
      headers: { "content-type": "application/json", "x-api-key": other.apiKey },
      body: JSON.stringify({ recipient: target }),
    });
    expect((await record(third, theirs)).payload.message).toBe(`theirs ${tag}`);
  });

  it("given an e-mail with the recipient in cc, then it is erased too", async () => {
    const other = await onboard(h);
    await createTemplate(h, other.apiKey, { name: "hello", code: "<p>Hi</p>" });
    const body = email("main@example.com");
    body.payload.message.to.push({ email: "Carbon@Example.com", type: "cc" } as never);
    const id = await send(other, "email", body);
    const response = await h.app.request("/api/v1/erasures", {
      method: "POST",
      headers: { "content-type": "application/json", "x-api-key": other.apiKey },
      body: JSON.stringify({ recipient: "carbon@example.com" }),
    });
    expect(await response.json()).toEqual({ messages_erased: 1 });
    expect((await record(other, id)).payload.template_fields).toBeNull();
  });

  it("refuses a body without a recipient, and a request without a key", async () => {
    const response = await h.app.request("/api/v1/erasures", {
      method: "POST",
      headers: { "content-type": "application/json", "x-api-key": org.apiKey },
      body: JSON.stringify({ recipient: "" }),
    });
    await expectError(response, 400, /recipient/);
    const unknownField = await h.app.request("/api/v1/erasures", {
      method: "POST",
      headers: { "content-type": "application/json", "x-api-key": org.apiKey },
      body: JSON.stringify({ recipient: "+14155550100", everything: true }),
    });
    await expectError(unknownField, 400);
    const noKey = await h.app.request("/api/v1/erasures", {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ recipient: "+14155550100" }),
    });
    await expectError(noKey, 401);
  });

  it("the append-only trigger still refuses every other change, with or without the erasure's setting", async () => {
    const attempt = (setting: string | null, change: string) =>
      h.sql.begin(async (tx) => {
        if (setting) await tx`select set_config(${setting}, 'on', true)`;
        await tx.unsafe(`update message_events set ${change} where message_id = $1 and seq = 1`, [ids.push]);
      });
    await expect(attempt(null, "content_enc = null, recipient_keys = null")).rejects.toThrow(/append-only/);
    await expect(attempt("notify.erasing_content", "type = 'accepted', data = '{}'::jsonb")).rejects.toThrow(
      /append-only/,
    );
    await expect(attempt("notify.erasing_content", "content_enc = '\\x00'::bytea")).rejects.toThrow(
      /append-only/,
    );
    await expect(
      attempt("notify.erasing_content", "content_enc = null, recipient_keys = null, retry_count = 7"),
    ).rejects.toThrow(/append-only/);
    await expect(h.sql`delete from message_events where message_id = ${ids.push}`).rejects.toThrow(
      /append-only/,
    );
  });
});

describe("erasing an organization's data", () => {
  it("destroys its keys: every record reads null content, every row and event stays, and the rebuild gives the same records", async () => {
    const victim = await onboard(h);
    const neighbour = await onboard(h);
    const id = await send(victim, "sms", sms("+14155550188", `victim ${tag}`));
    const theirs = await send(neighbour, "sms", sms("+14155550188", `neighbour ${tag}`));
    await finished(victim, id);
    // Another process that read the key before, and keeps keys for no time at all.
    const elsewhere = createContentVault(h.sql, {
      CONTENT_MASTER_KEY: TEST_MASTER_KEY,
      CONTENT_MASTER_KEY_ID: "test",
      CONTENT_PREVIOUS_MASTER_KEYS: undefined,
      DATA_KEY_CACHE_TTL_MS: 0,
    });
    const [accepted] = await eventRows([id]);
    const before = await elsewhere.opener([accepted?.content_enc]);
    expect(before.open(accepted?.content_enc ?? null, victim.id, id)).toBeTruthy();
    const eventsBefore = await eventRows([id]);

    const response = await h.app.request(`/api/v1/organizations/${victim.id}/data`, { method: "DELETE" });
    expect(response.status).toBe(200);
    expect(await response.json()).toEqual({ organization_id: victim.id, data_keys_destroyed: 1 });

    expect(await record(victim, id)).toMatchObject({
      status: "success",
      receiver_id: null,
      payload: { message: null, recipient: null },
    });
    expect(await eventRows([id])).toEqual(eventsBefore);
    const after = await elsewhere.opener([accepted?.content_enc]);
    expect(after.open(accepted?.content_enc ?? null, victim.id, id)).toBeUndefined();
    expect((await record(neighbour, theirs)).payload.message).toBe(`neighbour ${tag}`);

    const records = await recordsOf(victim.id);
    await rebuildProjections(h.sql);
    expect(await recordsOf(victim.id)).toEqual(records);

    // A later send gets a new key and reads back.
    const later = await send(victim, "sms", sms("+14155550188", `later ${tag}`));
    expect((await record(victim, later)).payload.message).toBe(`later ${tag}`);
  });

  it("answers 404 for an unknown organization and 400 for a malformed id", async () => {
    await expectError(
      await h.app.request(`/api/v1/organizations/${randomUUID()}/data`, { method: "DELETE" }),
      404,
    );
    await expectError(await h.app.request("/api/v1/organizations/nope/data", { method: "DELETE" }), 400);
  });

  it("needs the onboarding token when one is set", async () => {
    const guarded = createHarness({ ONBOARDING_TOKEN: "t".repeat(24) });
    try {
      const path = `/api/v1/organizations/${org.id}/data`;
      await expectError(await guarded.app.request(path, { method: "DELETE" }), 401);
      await expectError(
        await guarded.app.request(path, { method: "DELETE", headers: { "x-api-key": org.apiKey } }),
        401,
      );
    } finally {
      await guarded.close();
    }
  });
});

describe("a message whose content was erased before its delivery", () => {
  it("is rejected with reason content_erased, without calling the provider", async () => {
    const quiet = createHarness();
    try {
      const victim = await onboard(quiet);
      const response = await sendSms(quiet, victim.apiKey, sms("+14155550199", `never ${tag}`));
      const { request_id } = (await response.json()) as { request_id: string };
      await quiet.app.request(`/api/v1/organizations/${victim.id}/data`, { method: "DELETE" });
      const calls: SmsMessage[] = [];
      quiet.startWorker({
        providers: {
          sms: {
            name: "recording",
            send: (m) => {
              calls.push(m);
              return simulator.send(m);
            },
          },
        },
      });
      const events = await eventually(async () => {
        const answer = await quiet.app.request(`/api/v1/messages/${request_id}/events`, {
          headers: { "x-api-key": victim.apiKey },
        });
        const { events } = (await answer.json()) as { events: Array<{ type: string; reason?: string }> };
        return events.at(-1)?.type === "rejected" ? events : undefined;
      });
      expect(events.at(-1)).toMatchObject({ type: "rejected", reason: "content_erased" });
      expect(calls).toHaveLength(0);
    } finally {
      await quiet.close();
    }
  });
});

describe("messages accepted before content was encrypted", () => {
  it("read as before, and once sealed by content:seal-existing hold no clear text and read the same", async () => {
    const legacy = await onboard(h);
    const id = randomUUID();
    const now = new Date();
    // Written as the code before encryption wrote it: the whole content in the event's data.
    await appendEvents(h.sql, initialState, [
      {
        type: "accepted",
        retryCount: 0,
        occurredAt: now.toISOString(),
        data: {
          id,
          organizationId: legacy.id,
          productId: legacy.productId,
          channel: "sms",
          priority: "medium",
          notificationType: null,
          retryEnabled: true,
          recipient: "+14155550166",
          sender: "ACME",
          expiresAt: new Date(now.getTime() + 60_000).toISOString(),
          body: `legacy ${tag}`,
        },
      },
    ]);
    expect(await rowsAsText([id])).toContain(`legacy ${tag}`);
    const before = await record(legacy, id);
    expect(before.payload.message).toBe(`legacy ${tag}`);

    expect(await sealExistingContent(h.sql, h.deps.store.content, { pageSize: 2 })).toBeGreaterThanOrEqual(1);

    expect(await rowsAsText([id])).not.toContain(`legacy ${tag}`);
    expect(await rowsAsText([id])).not.toContain("+14155550166");
    expect(await record(legacy, id)).toEqual(before);
    const records = await recordsOf(legacy.id);
    await rebuildProjections(h.sql);
    expect(await recordsOf(legacy.id)).toEqual(records);
    // And now erasable like the others.
    const response = await h.app.request("/api/v1/erasures", {
      method: "POST",
      headers: { "content-type": "application/json", "x-api-key": legacy.apiKey },
      body: JSON.stringify({ recipient: "+14155550166" }),
    });
    expect(await response.json()).toEqual({ messages_erased: 1 });
  });

  it("the trigger lets a sealing through only as content:seal-existing does it, and never refills an erased event", async () => {
    const legacy = await onboard(h);
    const id = randomUUID();
    const now = new Date();
    await appendEvents(h.sql, initialState, [
      {
        type: "accepted",
        retryCount: 0,
        occurredAt: now.toISOString(),
        data: {
          id,
          organizationId: legacy.id,
          productId: legacy.productId,
          channel: "sms",
          priority: "medium",
          notificationType: null,
          retryEnabled: true,
          recipient: "+14155550177",
          sender: "ACME",
          expiresAt: new Date(now.getTime() + 60_000).toISOString(),
          body: `legacy ${tag}`,
        },
      },
    ]);
    const attempt = (setting: string, change: string) =>
      h.sql.begin(async (tx) => {
        await tx`select set_config(${setting}, 'on', true)`;
        await tx.unsafe(`update message_events set ${change} where message_id = $1 and seq = 1`, [id]);
      });
    const sealed = "content_enc = '\\x00'::bytea, recipient_keys = array['k']";
    // Dropping a clear field, or every field, is refused.
    await expect(
      attempt("notify.sealing_content", `${sealed}, data = data - 'recipient' - 'body' - 'sender'`),
    ).rejects.toThrow(/append-only/);
    await expect(attempt("notify.sealing_content", `${sealed}, data = '{}'::jsonb`)).rejects.toThrow(
      /append-only/,
    );
    // Changing a clear field is refused.
    await expect(
      attempt(
        "notify.sealing_content",
        `${sealed}, data = data - 'recipient' - 'body' || '{"sender":"EVIL"}'`,
      ),
    ).rejects.toThrow(/append-only/);

    // The real sealing goes through, then the erasure.
    expect(await sealExistingContent(h.sql, h.deps.store.content)).toBeGreaterThanOrEqual(1);
    const response = await h.app.request("/api/v1/erasures", {
      method: "POST",
      headers: { "content-type": "application/json", "x-api-key": legacy.apiKey },
      body: JSON.stringify({ recipient: "+14155550177" }),
    });
    expect(await response.json()).toEqual({ messages_erased: 1 });
    // An erased event (no content, no recipient in its data) cannot be refilled.
    await expect(attempt("notify.sealing_content", sealed)).rejects.toThrow(/append-only/);
    const [row] = await h.sql<Array<{ content_enc: Buffer | null }>>`
      select content_enc from message_events where message_id = ${id} and seq = 1`;
    expect(row?.content_enc).toBeNull();
  });

  it("the erasing exception touches only accepted events", async () => {
    const org = await onboard(h);
    const id = await send(org, "sms", sms("+14155550178", `other ${tag}`));
    await eventually(async () => {
      const [row] = await h.sql`select 1 from message_events where message_id = ${id} and seq = 2`;
      return row;
    });
    await expect(
      h.sql.begin(async (tx) => {
        await tx`select set_config('notify.erasing_content', 'on', true)`;
        await tx`update message_events set content_enc = null, recipient_keys = null
                 where message_id = ${id} and seq = 2`;
      }),
    ).rejects.toThrow(/append-only/);
  });
});
