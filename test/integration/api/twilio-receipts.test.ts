import { randomUUID } from "node:crypto";
import { and, eq } from "drizzle-orm";
import twilio from "twilio";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { messages, webhookDeliveries } from "../../../db/schema.js";
import { createApp } from "../../../src/api/app.js";
import { createSmsProvider } from "../../../src/channels/sms/providers/index.js";
import { failInsertOnce } from "../../support/fail-once.js";
import {
  FakeTwilio,
  type SentSms,
  TWILIO_ACCOUNT_SID,
  TWILIO_AUTH_TOKEN,
} from "../../support/fake-twilio.js";
import {
  createHarness,
  eventually,
  expectError,
  getMessage,
  type Harness,
  onboard,
  sendNotification,
  sendSms,
} from "../../support/harness.js";
import { fetchDocument, responseChecker } from "../../support/openapi.js";
import { expectFinishedHistory } from "../workers/history.js";

/**
 * Twilio's status callbacks end to end: the worker sends through the Twilio provider to a local
 * stand-in for Twilio, which answers like Twilio and then posts status callbacks the way Twilio
 * does, each signed with the official `twilio` package's helper (never with our own code).
 */

const ACCOUNT_SID = TWILIO_ACCOUNT_SID;
const AUTH_TOKEN = TWILIO_AUTH_TOKEN;
/** Where Twilio is told to call back; the app is never reached at this host (nor told it). */
const PUBLIC_BASE_URL = "https://notify.example.test/behind-proxy";

let fake: FakeTwilio;
let h: Harness;
let org: Awaited<ReturnType<typeof onboard>>;
let expectDocumented: ReturnType<typeof responseChecker>;

beforeAll(async () => {
  fake = await FakeTwilio.start(PUBLIC_BASE_URL);
  h = createHarness({
    SMS_PROVIDER: "twilio",
    TWILIO_ACCOUNT_SID: ACCOUNT_SID,
    TWILIO_AUTH_TOKEN: AUTH_TOKEN,
    TWILIO_BASE_URL: fake.baseUrl,
    PUBLIC_BASE_URL: `${PUBLIC_BASE_URL}/`,
  });
  fake.attach(h.app);
  expectDocumented = responseChecker(await fetchDocument(h.app));
  h.startWorker({ providers: { sms: createSmsProvider(h.config) } });
  org = await onboard(h);
  // Subscribed to everything: the fan-out trigger writes a delivery per event that is sent.
  const endpoint = await h.app.request("/api/v1/webhooks/endpoints", {
    method: "POST",
    headers: { "content-type": "application/json", "x-api-key": org.apiKey },
    body: JSON.stringify({ url: "https://hooks.example.com/receipts" }),
  });
  expect(endpoint.status, await endpoint.clone().text()).toBe(201);
});
afterAll(async () => {
  await h?.close();
  await fake?.close();
});

let number = 0;
/** Sends an SMS to a number of its own; waits until Twilio got it and the success is recorded. */
async function sentSms(): Promise<{ id: string; sms: SentSms }> {
  const to = `+1415555${String(1000 + number++).padStart(4, "0")}`;
  const response = await sendSms(h, org.apiKey, { payload: { to, body: "Your code is 123456" } });
  expect(response.status).toBe(202);
  const id = ((await response.json()) as { request_id: string }).request_id;
  await eventually(async () => ((await row(id))?.status === "success" ? true : undefined), 15_000, "success");
  const sms = fake.sentTo(to);
  if (!sms) throw new Error("Twilio got no request");
  return { id, sms };
}

async function row(id: string) {
  const [found] = await h.db.select().from(messages).where(eq(messages.messageId, id));
  return found;
}

async function record(id: string) {
  const response = await getMessage(h, org.apiKey, id);
  expect(response.status).toBe(200);
  await expectDocumented(response, "get", "/api/v1/messages/{message_id}");
  return (await response.json()) as {
    status: string;
    delivery: { state: string; updated_at: string | null; error_code: string | null };
  };
}

async function history(id: string) {
  const response = await h.app.request(`/api/v1/messages/${id}/events`, {
    headers: { "x-api-key": org.apiKey },
  });
  expect(response.status).toBe(200);
  // The history's receipts are as the OpenAPI document describes them.
  await expectDocumented(response, "get", "/api/v1/messages/{message_id}/events");
  const body = (await response.json()) as
    | { events?: Array<Record<string, unknown>> }
    | Array<Record<string, unknown>>;
  return Array.isArray(body) ? body : (body.events ?? []);
}

async function webhookEvents(id: string): Promise<string[]> {
  const rows = await h.db
    .select({ type: webhookDeliveries.eventType, seq: webhookDeliveries.seq })
    .from(webhookDeliveries)
    .where(and(eq(webhookDeliveries.messageId, id), eq(webhookDeliveries.organizationId, org.id)))
    .orderBy(webhookDeliveries.seq);
  return rows.map((r) => r.type);
}

/** The receipts counter's value for an outcome, from the web process's metrics. */
async function counted(outcome: string): Promise<number> {
  const text = await h.deps.metrics.scrape();
  const line = text
    .split("\n")
    .find((l) => l.startsWith("notification_receipts_total{") && l.includes(`outcome="${outcome}"`));
  return line ? Number(line.split(" ").at(-1)) : 0;
}

describe("Twilio status callbacks", () => {
  it("the provider asks for callbacks at PUBLIC_BASE_URL + /callbacks/twilio/sms/{message id}", async () => {
    const { id, sms } = await sentSms();
    expect(sms.fields.StatusCallback).toBe(`${PUBLIC_BASE_URL}/callbacks/twilio/sms/${id}`);
    expect((await record(id)).delivery).toEqual({ state: "unknown", updated_at: null, error_code: null });
  });

  it("sent, then delivered: the record's delivery follows, duplicates and a late `sent` change nothing", async () => {
    const { id, sms } = await sentSms();
    const recordedBefore = await counted("recorded");
    const duplicatesBefore = await counted("duplicate");

    expect((await fake.callback(sms, "queued")).status).toBe(200);
    expect((await record(id)).delivery.state).toBe("unknown");
    expect((await fake.callback(sms, "sent")).status).toBe(200);
    expect((await record(id)).delivery).toEqual({
      state: "sent",
      updated_at: expect.any(String),
      error_code: null,
    });

    expect((await fake.callback(sms, "delivered")).status).toBe(200);
    const delivered = await record(id);
    expect(delivered.status).toBe("success");
    expect(delivered.delivery).toEqual({
      state: "delivered",
      updated_at: expect.any(String),
      error_code: null,
    });
    const version = (await row(id))?.version;

    // Twilio repeats itself, and a `sent` may come after the `delivered`.
    expect((await fake.callback(sms, "delivered")).status).toBe(200);
    expect((await fake.callback(sms, "sent")).status).toBe(200);
    expect((await record(id)).delivery).toEqual(delivered.delivery);
    expect((await row(id))?.version).toBe(version);

    expect(await counted("recorded")).toBe(recordedBefore + 2);
    expect(await counted("duplicate")).toBe(duplicatesBefore + 2);

    const receipts = (await history(id)).filter((entry) => entry.type === "receipt");
    expect(receipts).toEqual([
      expect.objectContaining({
        state: "sent",
        provider: "twilio",
        provider_status: "sent",
        provider_message_id: sms.sid,
      }),
      expect.objectContaining({ state: "delivered", error_code: null, provider_status: "delivered" }),
    ]);
    // The history's invariants hold with receipts in it, and status stays the attempt's outcome.
    await expectFinishedHistory(h.db, id);
    // `sent` is not a webhook event; `delivered` is.
    expect(await webhookEvents(id)).toEqual(["message.accepted", "message.succeeded", "message.delivered"]);
  });

  it("undelivered with an error code, then failed: the first stays; a later delivered is the carrier's last word", async () => {
    const { id, sms } = await sentSms();
    expect((await fake.callback(sms, "sent")).status).toBe(200);
    expect((await fake.callback(sms, "undelivered", { extra: { ErrorCode: "30003" } })).status).toBe(200);
    expect((await record(id)).delivery).toEqual({
      state: "undelivered",
      updated_at: expect.any(String),
      error_code: "30003",
    });
    expect((await fake.callback(sms, "failed", { extra: { ErrorCode: "30008" } })).status).toBe(200);
    expect((await record(id)).delivery.error_code).toBe("30003");
    expect((await record(id)).status).toBe("success");
    expect(await webhookEvents(id)).toEqual(["message.accepted", "message.succeeded", "message.undelivered"]);

    expect((await fake.callback(sms, "delivered")).status).toBe(200);
    expect((await record(id)).delivery).toEqual({
      state: "delivered",
      updated_at: expect.any(String),
      error_code: null,
    });
  });

  it("undelivered because the recipient opted out (21610): the number goes on the suppression list, and the next SMS to it is rejected unsent", async () => {
    const { id, sms } = await sentSms();
    expect((await fake.callback(sms, "undelivered", { extra: { ErrorCode: "21610" } })).status).toBe(200);
    const listed = await h.app.request("/api/v1/suppressions?reason=stop", {
      headers: { "x-api-key": org.apiKey },
    });
    expect(listed.status).toBe(200);
    const { suppressions } = (await listed.json()) as {
      suppressions: Array<{ channel: string; recipient: string | null; reason: string; message_id: string }>;
    };
    // Entered from the message's own recipient (its blind index): listed without the number.
    expect(suppressions.filter((entry) => entry.message_id === id)).toEqual([
      expect.objectContaining({ channel: "sms", recipient: null, reason: "stop", message_id: id }),
    ]);
    // A repeated callback adds nothing.
    expect((await fake.callback(sms, "undelivered", { extra: { ErrorCode: "21610" } })).status).toBe(200);
    const again = await h.app.request("/api/v1/suppressions?reason=stop", {
      headers: { "x-api-key": org.apiKey },
    });
    const listedAgain = ((await again.json()) as { suppressions: Array<{ message_id: string }> })
      .suppressions;
    expect(listedAgain.filter((entry) => entry.message_id === id)).toHaveLength(1);

    const to = sms.fields.To as string;
    const sentBefore = fake.sent.filter((sent) => sent.fields.To === to).length;
    const next = await sendSms(h, org.apiKey, { payload: { to, body: "Your code is 654321" } });
    expect(next.status).toBe(202);
    const nextId = ((await next.json()) as { request_id: string }).request_id;
    await eventually(
      async () => ((await row(nextId))?.status === "rejected" ? true : undefined),
      15_000,
      "rejected",
    );
    expect(fake.sent.filter((sent) => sent.fields.To === to)).toHaveLength(sentBefore);
  });

  it("an opt-out whose suppression entry fails to be written is not recorded either (500); the same callback again records both", async () => {
    const { id, sms } = await sentSms();
    const stops = async () => {
      const listed = await h.app.request("/api/v1/suppressions?reason=stop&limit=1000", {
        headers: { "x-api-key": org.apiKey },
      });
      const { suppressions } = (await listed.json()) as { suppressions: Array<{ message_id: string }> };
      return suppressions.filter((entry) => entry.message_id === id);
    };
    const restore = await failInsertOnce(h.sql, "suppressions", id);
    try {
      const failed = await fake.callback(sms, "undelivered", { extra: { ErrorCode: "21610" } });
      await expectError(failed, 500);
      // Nothing half-written: the receipt is not there without its entry.
      expect((await record(id)).delivery.state).toBe("unknown");
      expect((await history(id)).filter((event) => event.type === "receipt")).toEqual([]);
      expect(await stops()).toEqual([]);

      // Sent again (Twilio's retry when its connection overrides ask for one, or a later callback).
      expect((await fake.callback(sms, "undelivered", { extra: { ErrorCode: "21610" } })).status).toBe(200);
      expect((await record(id)).delivery).toMatchObject({ state: "undelivered", error_code: "21610" });
      expect(await stops()).toHaveLength(1);
    } finally {
      await restore();
    }
  });

  it("an undelivered receipt for another reason suppresses nothing", async () => {
    const { id, sms } = await sentSms();
    expect((await fake.callback(sms, "undelivered", { extra: { ErrorCode: "30003" } })).status).toBe(200);
    const listed = await h.app.request("/api/v1/suppressions", { headers: { "x-api-key": org.apiKey } });
    const { suppressions } = (await listed.json()) as { suppressions: Array<{ message_id: string }> };
    expect(suppressions.filter((entry) => entry.message_id === id)).toEqual([]);
  });

  it("a forged callback (wrong token, another URL, the Host's URL, altered fields, no signature) is a 403 and changes nothing", async () => {
    const { id, sms } = await sentSms();
    const before = await row(id);
    const forgedBefore = await counted("bad_signature");
    const path = `/callbacks/twilio/sms/${id}`;
    const forgeries = [
      fake.callback(sms, "delivered", { token: "tok_not_the_account_token_00000000" }),
      fake.callback(sms, "delivered", { signedUrl: `https://attacker.example${path}` }),
      fake.callback(sms, "delivered", { signedUrl: `http://internal.example${path}` }),
      fake.callback(sms, "delivered", {
        signedUrl: `${PUBLIC_BASE_URL}/callbacks/twilio/sms/${randomUUID()}`,
      }),
      fake.callback(sms, "sent", { tamper: { MessageStatus: "undelivered", ErrorCode: "30003" } }),
      fake.callback(sms, "delivered", { signature: null }),
      fake.callback(sms, "delivered", { signature: "" }),
      fake.callback(sms, "delivered", { signature: "not base64 at all" }),
    ];
    for (const response of await Promise.all(forgeries))
      await expectError(response, 403, /X-Twilio-Signature/);
    expect(await row(id)).toEqual(before);
    expect((await history(id)).filter((entry) => entry.type === "receipt")).toEqual([]);
    expect(await counted("bad_signature")).toBe(forgedBefore + forgeries.length);
  });

  it("an unknown message, one of another channel, and a SID not the message's: 200, nothing recorded, counted", async () => {
    const { id, sms } = await sentSms();
    const before = await row(id);
    const counts = {
      unknown: await counted("unknown_message"),
      other: await counted("other_provider"),
      mismatch: await counted("provider_id_mismatch"),
    };

    const unknownId = randomUUID();
    const unknown = await fake.callback(sms, "delivered", {
      url: `${PUBLIC_BASE_URL}/callbacks/twilio/sms/${unknownId}`,
    });
    expect(unknown.status).toBe(200);
    const notAnId = await fake.callback(sms, "delivered", {
      url: `${PUBLIC_BASE_URL}/callbacks/twilio/sms/nope`,
    });
    expect(notAnId.status).toBe(200);

    const email = await sendNotification(h, "email", org.apiKey, {
      payload: {
        template_name: "missing-template",
        message: { from_email: "a@acme.test", subject: "Hi", to: [{ email: "ada@example.com" }] },
      },
    });
    expect(email.status).toBe(202);
    const emailId = ((await email.json()) as { request_id: string }).request_id;
    const otherChannel = await fake.callback(sms, "delivered", {
      url: `${PUBLIC_BASE_URL}/callbacks/twilio/sms/${emailId}`,
    });
    expect(otherChannel.status).toBe(200);
    expect((await h.deps.store.loadMessage(emailId)).events.map((e) => e.event.type)).not.toContain(
      "receipt",
    );

    const mismatch = await fake.callback(sms, "delivered", {
      extra: {
        MessageSid: "SMffffffffffffffffffffffffffffffff",
        SmsSid: "SMffffffffffffffffffffffffffffffff",
      },
    });
    expect(mismatch.status).toBe(200);

    expect(await row(id)).toEqual(before);
    expect(await counted("unknown_message")).toBe(counts.unknown + 2);
    expect(await counted("other_provider")).toBe(counts.other + 1);
    expect(await counted("provider_id_mismatch")).toBe(counts.mismatch + 1);
  });

  it("receipts that come before our own success are kept, and the success is recorded after them, sent once", async () => {
    let receiptsBeforeAnswer: number[] = [];
    fake.beforeAnswer = async (sms) => {
      // Twilio's callbacks beat its own 201 to us: the worker has not recorded the success yet.
      receiptsBeforeAnswer = [
        (await fake.callback(sms, "sent")).status,
        (await fake.callback(sms, "delivered")).status,
      ];
    };
    try {
      const { id, sms } = await sentSms();
      expect(receiptsBeforeAnswer).toEqual([200, 200]);
      const stored = (await h.deps.store.loadMessage(id)).events;
      expect(stored.map((e) => e.event.type)).toEqual([
        "accepted",
        "pending",
        "receipt",
        "receipt",
        "success",
      ]);
      const [, , firstReceipt] = stored;
      expect(firstReceipt?.event.type === "receipt" && firstReceipt.event.data.status).toBe("pending");
      const final = await record(id);
      expect(final.status).toBe("success");
      expect(final.delivery.state).toBe("delivered");
      // Sent once: the receipts did not make the worker take its attempt for an interrupted one.
      expect(fake.sent.filter((s) => s.fields.To === sms.fields.To)).toHaveLength(1);
      expect(await webhookEvents(id)).toEqual(["message.accepted", "message.delivered", "message.succeeded"]);
      await expectFinishedHistory(h.db, id);
    } finally {
      fake.beforeAnswer = undefined;
    }
  });

  it("callbacks racing each other all land: each is decided again after a conflict, none is a 500", async () => {
    const { id, sms } = await sentSms();
    const statuses = ["sent", "undelivered", "delivered", "sent", "delivered", "failed", "delivered", "sent"];
    const responses = await Promise.all(
      statuses.map((status) => fake.callback(sms, status, { extra: { ErrorCode: "30003" } })),
    );
    expect(responses.map((r) => r.status)).toEqual(statuses.map(() => 200));
    expect((await record(id)).delivery).toEqual({
      state: "delivered",
      updated_at: expect.any(String),
      error_code: null,
    });
    // Only receipts that moved the delivery forward were appended, each state at most once.
    const receipts = (await history(id))
      .filter((entry) => entry.type === "receipt")
      .map((entry) => entry.state);
    expect(new Set(receipts).size).toBe(receipts.length);
    expect(receipts.at(-1)).toBe("delivered");
    await expectFinishedHistory(h.db, id);
  });

  it("bad requests: not a form, too large, or a signed callback with no status", async () => {
    const { id, sms } = await sentSms();
    const path = `/callbacks/twilio/sms/${id}`;
    await expectError(
      await h.app.request(path, {
        method: "POST",
        headers: { "content-type": "application/json", "x-twilio-signature": "x" },
        body: "{}",
      }),
      415,
    );
    await expectError(
      await h.app.request(path, {
        method: "POST",
        headers: { "content-type": "application/x-www-form-urlencoded", "x-twilio-signature": "x" },
        body: `Body=${"a".repeat(20_000)}`,
      }),
      413,
    );
    const fields = { MessageSid: sms.sid };
    const url = `${PUBLIC_BASE_URL}${path}`;
    await expectError(
      await h.app.request(path, {
        method: "POST",
        headers: {
          "content-type": "application/x-www-form-urlencoded",
          "x-twilio-signature": twilio.getExpectedTwilioSignature(AUTH_TOKEN, url, fields),
        },
        body: new URLSearchParams(fields).toString(),
      }),
      400,
      /MessageStatus/,
    );
  });

  it("without PUBLIC_BASE_URL the route is not there (no callback was asked for)", async () => {
    const app = createApp({ ...h.deps, config: { ...h.config, PUBLIC_BASE_URL: undefined } });
    const { sms } = await sentSms();
    const path = (sms.fields.StatusCallback ?? "").slice(PUBLIC_BASE_URL.length);
    const fields = { MessageSid: sms.sid, MessageStatus: "delivered" };
    await expectError(
      await app.request(path, {
        method: "POST",
        headers: {
          "content-type": "application/x-www-form-urlencoded",
          "x-twilio-signature": twilio.getExpectedTwilioSignature(
            AUTH_TOKEN,
            sms.fields.StatusCallback ?? "",
            fields,
          ),
        },
        body: new URLSearchParams(fields).toString(),
      }),
      404,
    );
  });
});
