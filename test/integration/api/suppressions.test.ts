import { createECDH, randomBytes } from "node:crypto";
import { eq } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { suppressions } from "../../../db/schema.js";
import type { EmailMessage } from "../../../src/channels/email/providers/provider.js";
import type { PushMessage } from "../../../src/channels/push/providers/provider.js";
import {
  SimulatorPushProvider,
  simulatorPushEndpoint,
} from "../../../src/channels/push/providers/simulator.js";
import type { SmsMessage } from "../../../src/channels/sms/providers/provider.js";
import { SimulatorSmsProvider } from "../../../src/channels/sms/providers/simulator.js";
import { suppressRecipient } from "../../../src/store/suppressions.js";
import {
  createHarness,
  createTemplate,
  eventually,
  expectError,
  onboard,
  sendNotification,
  sendSms,
} from "../../support/harness.js";

/**
 * The suppression list (docs/decisions/0039): its API, the worker's check before every attempt,
 * the entries the worker adds from providers' refusals, and what erasures do to it.
 */

const h = createHarness({ RETRY_BASE_DELAY_MS: "10" });

/** Every provider call, by channel: the list's promise is that a suppressed recipient gets none. */
const smsSent: SmsMessage[] = [];
const emailSent: EmailMessage[] = [];
const pushSent: PushMessage[] = [];
const sms = new SimulatorSmsProvider();
const push = new SimulatorPushProvider();

let apiKey = "";
let organizationId = "";
let otherKey = "";

beforeAll(async () => {
  const [org, other] = await Promise.all([onboard(h), onboard(h)]);
  apiKey = org.apiKey;
  organizationId = org.id;
  otherKey = other.apiKey;
  await createTemplate(h, apiKey, { name: "hello", code: "<p>Hello</p>" });
  h.startWorker({
    providers: {
      sms: {
        name: "simulator",
        send: (message) => {
          smsSent.push(message);
          return sms.send(message);
        },
      },
      email: {
        name: "recorder",
        send: async (message) => {
          emailSent.push(message);
          return { ok: true, provider: "recorder", providerMessageId: `rec-${emailSent.length}` };
        },
      },
      push: {
        name: "simulator",
        send: (message) => {
          pushSent.push(message);
          return push.send(message);
        },
      },
    },
  });
});
afterAll(() => h.close());

function api(path: string, init: { method?: string; body?: unknown; key?: string } = {}) {
  return h.app.request(path, {
    method: init.method ?? "GET",
    headers: {
      "x-api-key": init.key ?? apiKey,
      ...(init.body !== undefined && { "content-type": "application/json" }),
    },
    ...(init.body !== undefined && { body: JSON.stringify(init.body) }),
  });
}

interface Listed {
  channel: string;
  recipient: string | null;
  reason: string;
  message_id: string | null;
  created_at: string;
}

async function list(
  query = "",
  key = apiKey,
): Promise<{ suppressions: Listed[]; next_cursor: string | null }> {
  const response = await api(`/api/v1/suppressions${query}`, { key });
  expect(response.status).toBe(200);
  return (await response.json()) as { suppressions: Listed[]; next_cursor: string | null };
}

async function suppress(entries: Array<{ channel: string; recipient: string }>, key = apiKey) {
  const response = await api("/api/v1/suppressions", { method: "POST", body: { entries }, key });
  expect(response.status).toBe(200);
  return (await response.json()) as {
    added: number;
    already_suppressed: number;
    entries: Array<{ channel: string; recipient: string; status: string }>;
  };
}

const lift = (channel: string, recipient: string, query = "", key = apiKey) =>
  api(`/api/v1/suppressions/${channel}/${encodeURIComponent(recipient)}${query}`, { method: "DELETE", key });

interface HistoryEntry {
  type: string;
  kind?: string;
  reason?: string;
  error?: { code: string; message: string } | null;
  suppression?: { reason: string; created_at: string };
  suppressed?: Array<{ reason: string; created_at: string }>;
}

/** The message's history once it has ended. */
async function finalHistory(messageId: string): Promise<HistoryEntry[]> {
  return eventually(
    async () => {
      const response = await api(`/api/v1/messages/${messageId}/events`);
      const { events } = (await response.json()) as { events: HistoryEntry[] };
      return events.some((e) => ["success", "failed", "rejected"].includes(e.type)) ? events : undefined;
    },
    20_000,
    `message ${messageId} to end`,
  );
}

async function sendTo(to: string): Promise<string> {
  const response = await sendSms(h, apiKey, { payload: { to, body: "Your code is 123456" } });
  expect(response.status).toBe(202);
  return ((await response.json()) as { request_id: string }).request_id;
}

async function sendEmail(to: Array<{ email: string; type?: string }>): Promise<string> {
  const response = await sendNotification(h, "email", apiKey, {
    payload: { template_name: "hello", message: { from_email: "hi@acme.test", subject: "Hi", to } },
  });
  expect(response.status).toBe(202);
  return ((await response.json()) as { request_id: string }).request_id;
}

function subscription(endpoint: string) {
  const ecdh = createECDH("prime256v1");
  ecdh.generateKeys();
  return {
    endpoint,
    keys: { p256dh: ecdh.getPublicKey().toString("base64url"), auth: randomBytes(16).toString("base64url") },
  };
}

describe("POST /api/v1/suppressions", () => {
  it("adds manual entries, normalised, and says which were there already", async () => {
    const first = await suppress([
      { channel: "sms", recipient: "+1 (415) 555-0111" },
      { channel: "email", recipient: "Grace@Example.COM" },
      { channel: "push", recipient: "https://push.example.test/send/ABC" },
    ]);
    expect(first).toEqual({
      added: 3,
      already_suppressed: 0,
      entries: [
        { channel: "sms", recipient: "+14155550111", status: "added" },
        { channel: "email", recipient: "grace@example.com", status: "added" },
        { channel: "push", recipient: "https://push.example.test/send/abc", status: "added" },
      ],
    });
    const again = await suppress([
      { channel: "email", recipient: "grace@example.com" },
      { channel: "sms", recipient: "+14155550112" },
      { channel: "sms", recipient: "+14155550112" },
    ]);
    expect(again.entries.map((e) => e.status)).toEqual(["already_suppressed", "added", "already_suppressed"]);
    expect(again).toMatchObject({ added: 1, already_suppressed: 2 });
    // The same number on another channel, or in another organization, is another entry.
    expect((await suppress([{ channel: "sms", recipient: "+14155550111" }], otherKey)).added).toBe(1);
  });

  it("refuses an invalid recipient for its channel, and adds nothing", async () => {
    const cases: Array<[unknown, RegExp]> = [
      [{ entries: [{ channel: "sms", recipient: "4155550100" }] }, /entries\.0\.recipient: .*international/],
      [{ entries: [{ channel: "email", recipient: "not an address" }] }, /entries\.0\.recipient: .*e-mail/],
      [
        { entries: [{ channel: "push", recipient: "ftp://push.example.test/x" }] },
        /entries\.0\.recipient: .*http\(s\)/,
      ],
      [{ entries: [{ channel: "fax", recipient: "+14155550100" }] }, /channel/],
      [{ entries: [] }, /at least one/],
      [{ entries: [{ channel: "sms" }] }, /recipient/],
      [{ entries: [{ channel: "sms", recipient: "+14155550100", reason: "stop" }] }, /reason/],
      [
        { entries: Array.from({ length: 1001 }, () => ({ channel: "sms", recipient: "+14155550100" })) },
        /at most 1000/,
      ],
    ];
    for (const [body, pattern] of cases) {
      await expectError(await api("/api/v1/suppressions", { method: "POST", body }), 400, pattern);
    }
    const mixed = {
      entries: [
        { channel: "sms", recipient: "+14155550199" },
        { channel: "sms", recipient: "x" },
      ],
    };
    await expectError(await api("/api/v1/suppressions", { method: "POST", body: mixed }), 400, /entries\.1/);
    const listed = await list("?channel=sms&limit=1000");
    expect(listed.suppressions.map((s) => s.recipient)).not.toContain("+14155550199");
  });

  it("takes 1,000 entries in one request", async () => {
    const entries = Array.from({ length: 1000 }, (_, i) => ({
      channel: "email",
      recipient: `bulk-${i}@bulk.example`,
    }));
    const added = await suppress(entries);
    expect(added).toMatchObject({ added: 1000, already_suppressed: 0 });
  });
});

describe("GET /api/v1/suppressions", () => {
  it("lists the organization's entries a page at a time, filtered by channel and reason", async () => {
    const pages: Listed[] = [];
    let cursor: string | null = null;
    do {
      const page = await list(`?channel=sms&limit=2${cursor ? `&cursor=${cursor}` : ""}`);
      expect(page.suppressions.length).toBeLessThanOrEqual(2);
      pages.push(...page.suppressions);
      cursor = page.next_cursor;
    } while (cursor);
    const recipients = pages.map((s) => s.recipient);
    expect(recipients).toEqual(expect.arrayContaining(["+14155550111", "+14155550112"]));
    expect(new Set(recipients).size).toBe(recipients.length);
    for (const entry of pages) {
      expect(entry).toMatchObject({ channel: "sms", message_id: null });
      expect(Date.parse(entry.created_at)).not.toBeNaN();
    }
    expect((await list("?reason=complaint")).suppressions).toEqual([]);
    // The other organization sees its own entry only.
    const theirs = await list("?limit=1000", otherKey);
    expect(theirs.suppressions.map((s) => s.recipient)).toEqual(["+14155550111"]);
  });

  it("refuses a bad filter or cursor", async () => {
    for (const query of [
      "?channel=fax",
      "?reason=bored",
      "?limit=0",
      "?limit=1001",
      "?cursor=abc",
      "?foo=1",
    ]) {
      await expectError(await api(`/api/v1/suppressions${query}`), 400);
    }
  });

  it("keeps the recipient sealed at rest: only its blind index and ciphertext are stored", async () => {
    const rows = await h.db
      .select()
      .from(suppressions)
      .where(eq(suppressions.organizationId, organizationId));
    expect(rows.length).toBeGreaterThan(0);
    for (const row of rows) {
      expect(row.recipientKey).toMatch(/^[0-9a-f]{32}$/);
      expect(row.recipientSealed?.toString("latin1")).not.toMatch(/grace|4155550111/);
    }
  });
});

describe("DELETE /api/v1/suppressions/{channel}/{recipient}", () => {
  it("lifts a manual entry; an unknown one, or another organization's, is a 404", async () => {
    await suppress([{ channel: "email", recipient: "lift-me@example.com" }]);
    await expectError(await lift("email", "lift-me@example.com", "", otherKey), 404, /No such recipient/);
    expect((await lift("email", "LIFT-ME@example.com")).status).toBe(204);
    await expectError(await lift("email", "lift-me@example.com"), 404);
    await expectError(await lift("sms", "nonsense"), 400, /recipient/);
    await expectError(await lift("fax", "+14155550100"), 400);
  });

  it("lifts a push endpoint named in the path, URL-encoded", async () => {
    await suppress([{ channel: "push", recipient: "https://push.example.test/send/lift/1" }]);
    expect((await lift("push", "https://push.example.test/send/lift/1")).status).toBe(204);
  });

  it("needs force=true to lift a stop or a complaint", async () => {
    // A STOP from the provider (the simulator's opted-out number) adds a `stop` entry.
    const id = await sendTo("+15005550004");
    await finalHistory(id);
    const entry = await eventually(
      async () => (await list("?reason=stop")).suppressions.find((s) => s.recipient === "+15005550004"),
      10_000,
      "the stop entry",
    );
    expect(entry.message_id).toBe(id);
    await expectError(await lift("sms", "+15005550004"), 409, /force=true/);
    await expectError(await lift("sms", "+15005550004", "?force=yes"), 400);
    expect((await lift("sms", "+15005550004", "?force=true")).status).toBe(204);
    expect((await list("?reason=stop")).suppressions.map((s) => s.recipient)).not.toContain("+15005550004");
  });
});

describe("the worker's check before every attempt", () => {
  it("rejects a message to a suppressed number without calling the provider, and names the entry", async () => {
    const to = "+14155550121";
    await suppress([{ channel: "sms", recipient: to }]);
    const [entry] = (await list("?channel=sms&limit=1000")).suppressions.filter((s) => s.recipient === to);
    const id = await sendTo(to);
    const history = await finalHistory(id);
    expect(history.map((e) => e.type)).toEqual(["accepted", "rejected"]);
    expect(history[1]).toMatchObject({
      reason: "recipient_suppressed",
      error: { code: "recipient_suppressed" },
      suppression: { reason: "manual", created_at: entry?.created_at },
    });
    expect(JSON.stringify(history)).not.toContain("4155550121");
    expect(smsSent.filter((m) => m.to === to)).toEqual([]);
  });

  it("sends again once the entry is lifted", async () => {
    const to = "+14155550122";
    await suppress([{ channel: "sms", recipient: to }]);
    expect((await lift("sms", to)).status).toBe(204);
    const history = await finalHistory(await sendTo(to));
    expect(history.at(-1)?.type).toBe("success");
    expect(smsSent.filter((m) => m.to === to)).toHaveLength(1);
  });

  it("after a STOP, sends the number nothing more", async () => {
    const to = "+15005550004";
    const before = smsSent.filter((m) => m.to === to).length;
    const first = await finalHistory(await sendTo(to));
    expect(first.at(-1)).toMatchObject({ type: "rejected", reason: "recipient_refused" });
    await eventually(
      async () => (await list("?reason=stop")).suppressions.find((s) => s.recipient === to),
      10_000,
      "the stop entry",
    );
    const second = await finalHistory(await sendTo(to));
    expect(second.at(-1)).toMatchObject({ reason: "recipient_suppressed", suppression: { reason: "stop" } });
    expect(smsSent.filter((m) => m.to === to)).toHaveLength(before + 1);
  });

  it("after a push service's 410, suppresses the subscription", async () => {
    const endpoint = simulatorPushEndpoint("gone", `supp-${Date.now()}`);
    const send = async () => {
      const response = await sendNotification(h, "push", apiKey, {
        payload: { to: subscription(endpoint), title: "t", body: "b" },
      });
      expect(response.status).toBe(202);
      return ((await response.json()) as { request_id: string }).request_id;
    };
    const first = await finalHistory(await send());
    expect(first.at(-1)).toMatchObject({ type: "rejected", reason: "recipient_refused" });
    await eventually(
      async () =>
        (await list("?channel=push&reason=subscription_gone")).suppressions.find(
          (s) => s.recipient === endpoint.toLowerCase(),
        ),
      10_000,
      "the subscription_gone entry",
    );
    const second = await finalHistory(await send());
    expect(second.at(-1)).toMatchObject({
      reason: "recipient_suppressed",
      suppression: { reason: "subscription_gone" },
    });
    expect(pushSent.filter((m) => m.subscription.endpoint === endpoint)).toHaveLength(1);
  });

  it("leaves an e-mail's suppressed addresses out and sends to the rest; all suppressed is rejected", async () => {
    await suppress([
      { channel: "email", recipient: "Blocked@Mail.example" },
      { channel: "email", recipient: "cc-blocked@mail.example" },
    ]);
    const id = await sendEmail([
      { email: "open@mail.example" },
      { email: "blocked@mail.example" },
      { email: "cc-blocked@mail.example", type: "cc" },
      { email: "bcc-open@mail.example", type: "bcc" },
    ]);
    const history = await finalHistory(id);
    expect(history.at(-1)?.type).toBe("success");
    const started = history.find((e) => e.kind === "attempt_started");
    expect(started?.suppressed).toHaveLength(2);
    expect(started?.suppressed?.[0]).toMatchObject({ reason: "manual" });
    const sent = emailSent.find((m) => m.messageId === id);
    expect(sent?.to.map((a) => a.email)).toEqual(["open@mail.example"]);
    expect(sent?.cc).toEqual([]);
    expect(sent?.bcc.map((a) => a.email)).toEqual(["bcc-open@mail.example"]);

    const all = await sendEmail([
      { email: "blocked@mail.example" },
      { email: "cc-blocked@mail.example", type: "cc" },
    ]);
    expect((await finalHistory(all)).at(-1)).toMatchObject({
      type: "rejected",
      reason: "recipient_suppressed",
    });
    expect(emailSent.find((m) => m.messageId === all)).toBeUndefined();
  });

  it("an e-mail with no suppressed address names none in its attempt", async () => {
    const history = await finalHistory(await sendEmail([{ email: "plain@mail.example" }]));
    expect(history.find((e) => e.kind === "attempt_started")).not.toHaveProperty("suppressed");
  });
});

describe("suppressRecipient: what receipts call, with a message's blind index", () => {
  it("adds an entry the worker matches; without a sealed recipient the listing shows null", async () => {
    const to = "+14155550151";
    const [recipientKey] = await h.deps.store.content.recipientKeys(organizationId, to);
    expect(recipientKey).toMatch(/^[0-9a-f]{32}$/);
    const added = await suppressRecipient(h.db, {
      organizationId,
      channel: "sms",
      recipientKey: recipientKey as string,
      reason: "stop",
      messageId: null,
    });
    expect(added.size).toBe(1);
    // A second receipt for the same recipient changes nothing.
    const again = await suppressRecipient(h.db, {
      organizationId,
      channel: "sms",
      recipientKey: recipientKey as string,
      reason: "hard_bounce",
      messageId: null,
    });
    expect(again.size).toBe(0);
    const listed = (await list("?reason=stop&limit=1000")).suppressions;
    expect(listed.some((s) => s.recipient === null && s.channel === "sms")).toBe(true);
    const history = await finalHistory(await sendTo(to));
    expect(history.at(-1)).toMatchObject({ reason: "recipient_suppressed", suppression: { reason: "stop" } });
    expect(smsSent.filter((m) => m.to === to)).toEqual([]);
  });
});

describe("erasures", () => {
  it("a recipient's erasure keeps the entry, index only, and it still applies", async () => {
    const to = "+14155550131";
    await suppress([{ channel: "sms", recipient: to }]);
    const erased = await api("/api/v1/erasures", { method: "POST", body: { recipient: to } });
    expect(erased.status).toBe(200);
    const listed = (await list("?channel=sms&limit=1000")).suppressions;
    expect(listed.map((s) => s.recipient)).not.toContain(to);
    expect(listed.some((s) => s.recipient === null && s.reason === "manual")).toBe(true);
    const history = await finalHistory(await sendTo(to));
    expect(history.at(-1)).toMatchObject({ reason: "recipient_suppressed" });
    // Still lifted by naming it: the blind index finds it.
    expect((await lift("sms", to)).status).toBe(204);
  });

  it("an organization's erasure deletes its list", async () => {
    const org = await onboard(h);
    await suppress([{ channel: "sms", recipient: "+14155550141" }], org.apiKey);
    const response = await h.app.request(`/api/v1/organizations/${org.id}/data`, { method: "DELETE" });
    expect(response.status).toBeLessThan(300);
    expect(await h.db.select().from(suppressions).where(eq(suppressions.organizationId, org.id))).toEqual([]);
  });
});
