import { execFile } from "node:child_process";
import { randomUUID } from "node:crypto";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { connect } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { and, eq } from "drizzle-orm";
import nodemailer from "nodemailer";
import PostalMime from "postal-mime";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { suppressions as suppressionsTable, webhookDeliveries } from "../../../db/schema.js";
import { loadBouncesTls } from "../../../src/bounces/config.js";
import {
  type BounceIntake,
  createBounceIntake,
  type SuppressionCandidate,
} from "../../../src/bounces/intake.js";
import { SmtpEmailProvider } from "../../../src/channels/email/providers/smtp.js";
import { postfixDsn as postfixDsnTo, yahooArf as yahooArfTo } from "../../support/email-reports.js";
import { failInsertOnce } from "../../support/fail-once.js";
import {
  createHarness,
  createTemplate,
  eventually,
  getMessage,
  onboard,
  sendNotification,
  sendSms,
  silentLogger,
} from "../../support/harness.js";
import { fetchDocument, responseChecker } from "../../support/openapi.js";
import { PASSWORD, TestSmtpServer, USER } from "../../support/smtp-server.js";

/**
 * E-mail bounces and complaints end to end (docs/decisions/0040): the worker sends through the
 * SMTP provider to a local SMTP sink with a VERP return path; the reports come back to the
 * bounces intake (a real SMTP listener) over SMTP, sent by nodemailer as raw messages built the
 * way Postfix (DSN) and Yahoo's feedback loop (ARF) build theirs.
 */

const DOMAIN = "bounces.notify.test";
const RETURN_PATH = { domain: DOMAIN, localPart: "bounce" };
/** Where the feedback loops registered with the mailbox providers send their reports. */
const FEEDBACK_ADDRESS = `fbl@${DOMAIN}`;

const h = createHarness();
let smtp: TestSmtpServer;
let provider: SmtpEmailProvider;
let intake: BounceIntake;
let intakePort = 0;
let apiKey = "";
let organizationId = "";
let expectDocumented: ReturnType<typeof responseChecker>;
/** What the hook was told of each hard bounce and complaint. */
const suppressions: SuppressionCandidate[] = [];

/** The suppression list's entries that came from message `id`. */
async function listEntries(id: string) {
  return h.db
    .select({ channel: suppressionsTable.channel, reason: suppressionsTable.reason })
    .from(suppressionsTable)
    .where(eq(suppressionsTable.messageId, id));
}

beforeAll(async () => {
  smtp = await TestSmtpServer.start();
  provider = new SmtpEmailProvider({
    host: "127.0.0.1",
    port: smtp.port,
    secure: false,
    requireTls: false,
    user: USER,
    password: PASSWORD,
    timeoutMs: 2000,
    pool: false,
    returnPath: RETURN_PATH,
  });
  intake = createBounceIntake({
    sql: h.sql,
    logger: silentLogger,
    returnPath: RETURN_PATH,
    maxClients: 20,
    maxConnectionsPerIp: 3,
    feedbackAddress: FEEDBACK_ADDRESS.toUpperCase(),
    onBounceOrComplaint: async (_sql, candidate) => {
      suppressions.push(candidate);
    },
  });
  intakePort = await intake.listen(0, "127.0.0.1");
  const organization = await onboard(h);
  apiKey = organization.apiKey;
  organizationId = organization.id;
  expectDocumented = responseChecker(await fetchDocument(h.app));
  // Subscribed to everything: the fan-out trigger writes a delivery per event that is sent.
  const endpoint = await h.app.request("/api/v1/webhooks/endpoints", {
    method: "POST",
    headers: { "content-type": "application/json", "x-api-key": apiKey },
    body: JSON.stringify({ url: "https://hooks.example.com/bounces" }),
  });
  expect(endpoint.status, await endpoint.clone().text()).toBe(201);
  await createTemplate(h, apiKey, { name: "plain", code: "<p>Hello</p>" });
  h.startWorker({ providers: { email: provider } });
});
beforeEach(() => smtp.reset());
afterAll(async () => {
  await h.close();
  await provider.close();
  await smtp.close();
  await intake?.close();
});

/** Sends an e-mail to `to` through the API and the worker; waits for its success. */
async function sentEmail(to = "ada@example.com", key = apiKey): Promise<string> {
  const response = await sendNotification(h, "email", key, {
    payload: {
      template_name: "plain",
      template_content: [],
      message: {
        from_email: "hello@acme.test",
        from_name: "ACME",
        subject: "Hello",
        to: [{ email: to, type: "to" }],
      },
    },
  });
  expect(response.status, await response.clone().text()).toBe(202);
  const id = ((await response.json()) as { request_id: string }).request_id;
  await eventually(
    async () => ((await record(id, key)).status === "success" ? true : undefined),
    15_000,
    "success",
  );
  return id;
}

async function record(id: string, key = apiKey) {
  const response = await getMessage(h, key, id);
  expect(response.status).toBe(200);
  await expectDocumented(response, "get", "/api/v1/messages/{message_id}");
  return (await response.json()) as {
    status: string;
    delivery: { state: string; updated_at: string | null; error_code: string | null };
  };
}

async function receipts(id: string): Promise<Array<Record<string, unknown>>> {
  return (await history(id)).filter((event) => event.type === "receipt");
}

async function delayedEvents(id: string): Promise<Array<Record<string, unknown>>> {
  return (await history(id)).filter((event) => event.type === "delivery_delayed");
}

async function history(id: string): Promise<Array<Record<string, unknown>>> {
  const response = await h.app.request(`/api/v1/messages/${id}/events`, { headers: { "x-api-key": apiKey } });
  expect(response.status).toBe(200);
  // The history's e-mail receipts are as the OpenAPI document describes them.
  await expectDocumented(response, "get", "/api/v1/messages/{message_id}/events");
  const body = (await response.json()) as
    | { events?: Array<Record<string, unknown>> }
    | Array<Record<string, unknown>>;
  return Array.isArray(body) ? body : (body.events ?? []);
}

/** Sends `raw` to the intake over SMTP as a reporting MTA does (a DSN's sender is null: `MAIL FROM:<>`). */
async function report(to: string, raw: string, from = "") {
  const transport = nodemailer.createTransport({
    host: "127.0.0.1",
    port: intakePort,
    secure: false,
    ignoreTLS: true,
    connectionTimeout: 5000,
  });
  try {
    return await transport.sendMail({ envelope: { from, to: [to] }, raw });
  } finally {
    transport.close();
  }
}

const verp = (id: string) => `bounce+${id}@${DOMAIN}`;

/** A Postfix bounce of message `id`, to its return path (test/support/email-reports.ts). */
const postfixDsn = (id: string, recipient: string, action: string, status: string, diagnostic: string) =>
  postfixDsnTo(verp(id), id, recipient, action, status, diagnostic);

/** A Yahoo feedback-loop report about message `id`, to its return path. */
const yahooArf = (id: string, recipient: string, feedbackType = "abuse") =>
  yahooArfTo(verp(id), id, recipient, feedbackType);

/**
 * An abuse report as Microsoft's JMRP sends it to the one address registered with it (not to the
 * return path): ARF, the original message attached, its recipient redacted, and nothing else that
 * names the message but the original's own headers (`originalHeaders`).
 */
function jmrpArf(originalHeaders: string[], feedbackType = "abuse"): string {
  const boundary = "----=_NextPart_000_0001_01DB3F00.5A1B2C30";
  return [
    "From: staff@hotmail.example",
    `To: ${FEEDBACK_ADDRESS}`,
    "Subject: complaint about message from 192.0.2.10",
    "Date: Mon, 25 Nov 2026 02:00:00 +0000",
    "MIME-Version: 1.0",
    `Content-Type: multipart/report; report-type=feedback-report; boundary="${boundary}"`,
    "",
    `--${boundary}`,
    "Content-Type: text/plain; charset=us-ascii",
    "",
    "This is an email abuse report for an email message received from IP 192.0.2.10.",
    "",
    `--${boundary}`,
    "Content-Type: message/feedback-report",
    "",
    `Feedback-Type: ${feedbackType}`,
    "User-Agent: Microsoft JMRP/1.0",
    "Version: 1",
    "Source-IP: 192.0.2.10",
    "Arrival-Date: Mon, 25 Nov 2026 01:50:00 +0000",
    "",
    `--${boundary}`,
    "Content-Type: message/rfc822",
    "Content-Disposition: inline",
    "",
    "Received: from mail.acme.test ([192.0.2.10]) by mx.hotmail.example; Mon, 25 Nov 2026 01:50:00 +0000",
    "From: ACME <hello@acme.test>",
    "To: redacted@hotmail.example",
    "Subject: Hello",
    ...originalHeaders,
    "MIME-Version: 1.0",
    "Content-Type: text/plain",
    "",
    "Hello",
    "",
    `--${boundary}--`,
    "",
  ].join("\r\n");
}

async function webhookEvents(id: string): Promise<string[]> {
  const rows = await h.db
    .select({ type: webhookDeliveries.eventType })
    .from(webhookDeliveries)
    .where(and(eq(webhookDeliveries.messageId, id), eq(webhookDeliveries.organizationId, organizationId)))
    .orderBy(webhookDeliveries.seq);
  return rows.map((r) => r.type);
}

function counted(outcome: string): number {
  return (intake.counts as ReadonlyMap<string, number>).get(outcome) ?? 0;
}

describe("VERP", () => {
  it("each e-mail's envelope sender is bounce+{message id}@BOUNCE_DOMAIN; the From header stays the sender's", async () => {
    const id = await sentEmail();
    expect(smtp.received).toHaveLength(1);
    const [received] = smtp.received;
    expect(received?.mailFrom).toBe(`bounce+${id}@${DOMAIN}`);
    expect(received?.rcptTo).toEqual(["ada@example.com"]);
    const mail = await PostalMime.parse(received?.raw ?? "");
    expect(mail.from).toMatchObject({ address: "hello@acme.test", name: "ACME" });
  });
});

describe("the bounces intake", () => {
  it("a hard bounce that arrives after the organization's data was erased is recorded, and no entry comes back", async () => {
    const other = await onboard(h);
    await createTemplate(h, other.apiKey, { name: "plain", code: "<p>Hello</p>" });
    const id = await sentEmail("erased@example.com", other.apiKey);
    const erased = await h.app.request(`/api/v1/organizations/${other.id}/data`, { method: "DELETE" });
    expect(erased.status, await erased.clone().text()).toBe(200);
    const sent = await report(
      verp(id),
      postfixDsn(id, "erased@example.com", "failed", "5.1.1", "550 5.1.1 User unknown"),
    );
    expect(sent.response).toMatch(/^250 /);
    expect((await record(id, other.apiKey)).delivery.state).toBe("bounced");
    expect(await listEntries(id)).toEqual([]);
  });

  it("a Postfix DSN with 5.1.1 makes the delivery `bounced`; the same DSN again records nothing", async () => {
    const id = await sentEmail("gone@example.com");
    const dsn = postfixDsn(
      id,
      "gone@example.com",
      "failed",
      "5.1.1",
      "550 5.1.1 <gone@example.com>: Recipient address rejected: User unknown",
    );
    const sent = await report(verp(id), dsn);
    expect(sent.response).toMatch(/^250 /);
    const bounced = await record(id);
    expect(bounced.status).toBe("success");
    expect(bounced.delivery).toEqual({
      state: "bounced",
      updated_at: expect.any(String),
      error_code: "5.1.1",
    });
    expect(await receipts(id)).toEqual([
      expect.objectContaining({
        state: "bounced",
        error_code: "5.1.1",
        provider: "smtp",
        provider_status: "failed",
      }),
    ]);

    const duplicates = counted("duplicate");
    expect((await report(verp(id).toUpperCase(), dsn)).response).toMatch(/^250 /);
    expect(counted("duplicate")).toBe(duplicates + 1);
    expect(await receipts(id)).toHaveLength(1);
    expect((await record(id)).delivery).toEqual(bounced.delivery);
    expect((await webhookEvents(id)).filter((type) => type === "message.bounced")).toHaveLength(1);
    // A hard bounce goes to the suppression hook each time (a duplicate may be another recipient's).
    expect(suppressions.filter((s) => s.messageId === id)).toEqual([
      { messageId: id, recipient: "gone@example.com", reason: "hard_bounce" },
      { messageId: id, recipient: "gone@example.com", reason: "hard_bounce" },
    ]);
    // The suppression list has the message's recipient once (docs/decisions/0039).
    expect(await listEntries(id)).toEqual([{ channel: "email", reason: "hard_bounce" }]);
    // Lifted by the organization, it is not re-added by the same report coming again.
    await h.db.delete(suppressionsTable).where(eq(suppressionsTable.messageId, id));
    expect((await report(verp(id), dsn)).response).toMatch(/^250 /);
    expect(await listEntries(id)).toEqual([]);
  });

  it("a suppression entry that fails to be written fails the receipt too: 451, nothing recorded, and the sender's retry records both", async () => {
    const id = await sentEmail("flaky@example.com");
    const dsn = postfixDsn(id, "flaky@example.com", "failed", "5.1.1", "550 5.1.1 User unknown");
    const restore = await failInsertOnce(h.sql, "suppressions", id);
    try {
      const errors = counted("error");
      await expect(report(verp(id), dsn)).rejects.toMatchObject({ responseCode: 451 });
      expect(counted("error")).toBe(errors + 1);
      // Nothing half-written: no receipt without its entry.
      expect((await record(id)).delivery.state).toBe("unknown");
      expect(await receipts(id)).toEqual([]);
      expect(await listEntries(id)).toEqual([]);
      expect(await webhookEvents(id)).not.toContain("message.bounced");

      // The reporting MTA tries again later: this time both are written.
      expect((await report(verp(id), dsn)).response).toMatch(/^250 /);
      expect((await record(id)).delivery).toMatchObject({ state: "bounced", error_code: "5.1.1" });
      expect(await receipts(id)).toHaveLength(1);
      expect(await listEntries(id)).toEqual([{ channel: "email", reason: "hard_bounce" }]);
      expect((await webhookEvents(id)).filter((type) => type === "message.bounced")).toHaveLength(1);
    } finally {
      await restore();
    }
  });

  it("a 4.x.x delayed DSN is history only: the delivery, the status and the webhooks stay; once; not after a bounce", async () => {
    const id = await sentEmail("slow@example.com");
    const delayed = postfixDsn(
      id,
      "slow@example.com",
      "delayed",
      "4.4.1",
      "450 4.4.1 Host mail.example.com timed out, will retry",
    );
    const before = await record(id);
    const webhooksBefore = await webhookEvents(id);
    const delays = counted("delayed");
    expect((await report(verp(id), delayed)).response).toMatch(/^250 /);
    expect(counted("delayed")).toBe(delays + 1);
    const after = await record(id);
    expect(after.delivery).toEqual({ state: "unknown", updated_at: null, error_code: null });
    expect(after.status).toBe("success");
    expect(after).toEqual(before);
    expect(await receipts(id)).toEqual([]);
    // In the history (as the OpenAPI document describes it: `receipts` checks every response).
    expect(await delayedEvents(id)).toEqual([
      {
        seq: expect.any(Number),
        retry_count: 0,
        occurred_at: expect.any(String),
        type: "delivery_delayed",
        error_code: "4.4.1",
        provider: "smtp",
        provider_status: "delayed",
      },
    ]);
    expect(await webhookEvents(id)).toEqual(webhooksBefore);

    // The same DSN again (or the server's next warning) adds nothing.
    const duplicates = counted("duplicate");
    expect((await report(verp(id), delayed)).response).toMatch(/^250 /);
    expect(counted("duplicate")).toBe(duplicates + 1);
    expect(await delayedEvents(id)).toHaveLength(1);

    await report(
      verp(id),
      postfixDsn(id, "slow@example.com", "failed", "5.2.1", "550 5.2.1 Mailbox disabled"),
    );
    const bounced = await record(id);
    expect(bounced.delivery.state).toBe("bounced");
    await report(verp(id), delayed);
    expect((await record(id)).delivery).toEqual(bounced.delivery);
    expect(await receipts(id)).toHaveLength(1);
    expect(await delayedEvents(id)).toHaveLength(1);
    expect((await webhookEvents(id)).filter((type) => type === "message.bounced")).toHaveLength(1);
  });

  it("a delayed DSN after a bounce is not recorded (stale)", async () => {
    const id = await sentEmail("late@example.com");
    await report(verp(id), postfixDsn(id, "late@example.com", "failed", "5.1.1", "550 5.1.1 User unknown"));
    const duplicates = counted("duplicate");
    await report(verp(id), postfixDsn(id, "late@example.com", "delayed", "4.4.1", "450 4.4.1 timed out"));
    expect(counted("duplicate")).toBe(duplicates + 1);
    expect(await delayedEvents(id)).toEqual([]);
  });

  it("a failure with a 4.x.x status (the server gave up retrying) is a bounce", async () => {
    const id = await sentEmail("expired@example.com");
    await report(
      verp(id),
      postfixDsn(id, "expired@example.com", "failed", "4.4.7", "421 4.4.7 Message expired"),
    );
    expect((await record(id)).delivery).toMatchObject({ state: "bounced", error_code: "4.4.7" });
    // A soft bounce: no suppression.
    expect(suppressions.filter((s) => s.messageId === id)).toEqual([]);
    expect(await listEntries(id)).toEqual([]);
  });

  it("an ARF abuse report makes it `complained`, after a bounce too; `not-spam` is no complaint", async () => {
    const id = await sentEmail("grumpy@example.com");
    const before = counted("not_a_report");
    await report(verp(id), yahooArf(id, "grumpy@example.com", "not-spam"), "feedbackloop@yahoo.example");
    expect(counted("not_a_report")).toBe(before + 1);
    expect((await record(id)).delivery.state).toBe("unknown");

    await report(
      verp(id),
      postfixDsn(id, "grumpy@example.com", "failed", "5.7.1", "550 5.7.1 Message rejected as spam"),
    );
    expect((await record(id)).delivery.state).toBe("bounced");
    const sent = await report(verp(id), yahooArf(id, "grumpy@example.com"), "feedbackloop@yahoo.example");
    expect(sent.response).toMatch(/^250 /);
    expect((await record(id)).delivery).toEqual({
      state: "complained",
      updated_at: expect.any(String),
      error_code: null,
    });
    expect((await receipts(id)).map((event) => [event.state, event.provider_status])).toEqual([
      ["bounced", "failed"],
      ["complained", "abuse"],
    ]);
    const events = await webhookEvents(id);
    expect(events.filter((type) => type === "message.bounced" || type === "message.complained")).toEqual([
      "message.bounced",
      "message.complained",
    ]);
    expect(suppressions.filter((s) => s.messageId === id).map((s) => [s.reason, s.recipient])).toEqual([
      ["hard_bounce", "grumpy@example.com"],
      ["complaint", "grumpy@example.com"],
    ]);
    // A 5.7.1 refusal (policy: the relay, not the address) suppresses nothing; the complaint does.
    expect(await listEntries(id)).toEqual([{ channel: "email", reason: "complaint" }]);
  });

  it("garbage, a forged report for an unknown message and a report about an SMS are taken (250) and record nothing", async () => {
    const id = await sentEmail("kept@example.com");
    const notReports = counted("not_a_report");
    const garbage = await report(
      verp(id),
      "From: someone@example.net\r\nSubject: Out of office\r\n\r\nI am away until Monday.\r\n",
      "someone@example.net",
    );
    expect(garbage.response).toMatch(/^250 /);
    const broken = [
      "Content-Type: multipart/report; report-type=delivery-status; boundary=x",
      "",
      "--x",
      "Content-Type: message/delivery-status",
      "",
      "Reporting-MTA: dns; forged.example",
      "",
      "--x--",
    ].join("\r\n");
    expect((await report(verp(id), broken)).response).toMatch(/^250 /);
    expect(counted("not_a_report")).toBe(notReports + 2);
    expect((await record(id)).delivery.state).toBe("unknown");

    const unknownBefore = counted("unknown_message");
    const stranger = randomUUID();
    const forged = await report(
      verp(stranger),
      postfixDsn(stranger, "x@example.com", "failed", "5.1.1", "550 5.1.1 User unknown"),
    );
    expect(forged.response).toMatch(/^250 /);
    expect(counted("unknown_message")).toBe(unknownBefore + 1);

    const sms = await sendSms(h, apiKey, { payload: { to: "+14155550100", body: "hi" } });
    expect(sms.status).toBe(202);
    const smsId = ((await sms.json()) as { request_id: string }).request_id;
    await eventually(
      async () => ((await record(smsId)).status === "success" ? true : undefined),
      15_000,
      "sms success",
    );
    const otherBefore = counted("other_provider");
    await report(
      verp(smsId),
      postfixDsn(smsId, "x@example.com", "failed", "5.1.1", "550 5.1.1 User unknown"),
    );
    expect(counted("other_provider")).toBe(otherBefore + 1);
    expect((await record(smsId)).delivery.state).toBe("unknown");
  });

  it("a complaint to the feedback address names its message by the original's X-Notification-Id: `complained` and suppressed, as by the return path", async () => {
    const id = await sentEmail("fbl-user@example.com");
    // The headers the SMTP provider really set on the e-mail the recipient got.
    const sent = await PostalMime.parse(smtp.received[0]?.raw ?? "");
    const header = (name: string) => sent.headers.find((h) => h.key === name)?.value ?? "";
    expect(header("x-notification-id")).toBe(id);
    const arf = jmrpArf([`Message-ID: ${header("message-id")}`, `X-Notification-Id: ${id}`]);

    const answer = await report(FEEDBACK_ADDRESS, arf, "staff@hotmail.example");
    expect(answer.response).toMatch(/^250 /);
    expect((await record(id)).delivery).toEqual({
      state: "complained",
      updated_at: expect.any(String),
      error_code: null,
    });
    expect((await receipts(id)).map((event) => [event.state, event.provider_status])).toEqual([
      ["complained", "abuse"],
    ]);
    expect(await listEntries(id)).toEqual([{ channel: "email", reason: "complaint" }]);
    expect((await webhookEvents(id)).filter((type) => type === "message.complained")).toHaveLength(1);

    // The same report again, and by the return path too: one receipt, counted as duplicates.
    const duplicates = counted("duplicate");
    await report(FEEDBACK_ADDRESS.toUpperCase(), arf);
    await report(verp(id), yahooArf(id, "fbl-user@example.com"));
    expect(counted("duplicate")).toBe(duplicates + 2);
    expect(await receipts(id)).toHaveLength(1);
  });

  it("the original's Message-ID alone is enough (a loop that drops X- headers)", async () => {
    const id = await sentEmail("fbl-msgid@example.com");
    await report(FEEDBACK_ADDRESS, jmrpArf([`Message-ID: <${id}@acme.test>`]));
    expect((await record(id)).delivery.state).toBe("complained");
  });

  it("anything else to the feedback address is taken (250) and records nothing", async () => {
    const id = await sentEmail("fbl-other@example.com");
    const notReports = counted("not_a_report");
    const unidentified = counted("unidentified");
    const taken = async (raw: string) =>
      expect((await report(FEEDBACK_ADDRESS, raw)).response).toMatch(/^250 /);
    // A DSN (bounces go to the return path, never here), a `not-spam` report, an out-of-office reply.
    await taken(postfixDsn(id, "fbl-other@example.com", "failed", "5.1.1", "550 5.1.1 User unknown"));
    await taken(jmrpArf([`X-Notification-Id: ${id}`], "not-spam"));
    await taken("From: someone@example.net\r\nSubject: Out of office\r\n\r\nAway.\r\n");
    expect(counted("not_a_report")).toBe(notReports + 3);
    // Complaints that name no message: none, not an id (and another sender's Message-ID).
    await taken(jmrpArf([]));
    await taken(jmrpArf(["X-Notification-Id: 42", "Message-ID: <CAF=abc123@mail.gmail.example>"]));
    await taken(jmrpArf(["Message-ID: <CAF=abc123@mail.gmail.example>"]));
    expect(counted("unidentified")).toBe(unidentified + 3);
    const unknown = counted("unknown_message");
    await taken(jmrpArf([`X-Notification-Id: ${randomUUID()}`]));
    expect(counted("unknown_message")).toBe(unknown + 1);
    expect((await record(id)).delivery.state).toBe("unknown");
    expect(await listEntries(id)).toEqual([]);
  });

  it("refuses at RCPT (550) anything but a return path of ours: it never relays", async () => {
    const id = await sentEmail("ok@example.com");
    const dsn = postfixDsn(id, "ok@example.com", "failed", "5.1.1", "550 5.1.1 User unknown");
    for (const to of [
      "postmaster@bounces.notify.test",
      `fbl@elsewhere.example`,
      `fbl+x@${DOMAIN}`,
      `bounce+${id}@elsewhere.example`,
      `other+${id}@${DOMAIN}`,
      `bounce+not-a-uuid@${DOMAIN}`,
      "ada@example.com",
    ]) {
      await expect(report(to, dsn), to).rejects.toMatchObject({ responseCode: 550 });
    }
    expect((await record(id)).delivery.state).toBe("unknown");
  });

  it("refuses a message over 1 MiB (552) and a fourth connection from one address (421)", async () => {
    const id = await sentEmail("big@example.com");
    const huge = postfixDsn(id, "big@example.com", "failed", "5.1.1", "550 5.1.1 User unknown").replace(
      "This is a MIME-encapsulated message.",
      "x".repeat(1100 * 1024),
    );
    await expect(report(verp(id), huge)).rejects.toMatchObject({ responseCode: 552 });
    expect((await record(id)).delivery.state).toBe("unknown");

    // Opened one after the other, so the fourth and later are the ones over the limit.
    const greet = () =>
      new Promise<{ socket: ReturnType<typeof connect>; line: string }>((resolve, reject) => {
        const socket = connect(intakePort, "127.0.0.1");
        socket.once("data", (chunk: Buffer) => resolve({ socket, line: chunk.toString() }));
        socket.once("error", reject);
      });
    const open = async (n: number) => {
      const greetings = [];
      for (let i = 0; i < n; i++) greetings.push(await greet());
      return greetings;
    };
    const greetings = await open(6);
    expect(greetings.map((g) => g.line.slice(0, 4))).toEqual([
      "220 ",
      "220 ",
      "220 ",
      "421 ",
      "421 ",
      "421 ",
    ]);
    for (const { socket } of greetings) socket.destroy();
    // The refused ones are not held against the address: once they are closed, three are served again.
    await eventually(
      async () => {
        const again = await open(3);
        for (const { socket } of again) socket.destroy();
        return again.every((g) => g.line.startsWith("220 ")) ? true : undefined;
      },
      10_000,
      "three connections served again",
    );
  });
});

describe("STARTTLS on the listener (BOUNCES_TLS_KEY_FILE / BOUNCES_TLS_CERT_FILE)", () => {
  let dir = "";
  let cert = "";
  let tlsIntake: BounceIntake;
  let tlsPort = 0;

  /** A self-signed certificate for `name` (P-256), its key and certificate written under `dir`. */
  async function selfSigned(name: string, prefix: string) {
    const keyFile = join(dir, `${prefix}-key.pem`);
    const certFile = join(dir, `${prefix}-cert.pem`);
    await promisify(execFile)("openssl", [
      ...["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"],
      ...["-keyout", keyFile, "-out", certFile, "-days", "1", "-subj", `/CN=${name}`],
      ...["-addext", `subjectAltName=DNS:${name}`],
    ]);
    return { keyFile, certFile };
  }

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "bounces-tls-"));
    const files = await selfSigned(DOMAIN, "mx");
    const tls = loadBouncesTls({
      BOUNCES_TLS_KEY_FILE: files.keyFile,
      BOUNCES_TLS_CERT_FILE: files.certFile,
    });
    if (!tls) throw new Error("no TLS settings");
    cert = tls.cert;
    tlsIntake = createBounceIntake({
      sql: h.sql,
      logger: silentLogger,
      returnPath: RETURN_PATH,
      maxClients: 20,
      maxConnectionsPerIp: 3,
      tls,
    });
    tlsPort = await tlsIntake.listen(0, "127.0.0.1");
  });
  afterAll(async () => {
    await tlsIntake?.close();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  /** Sends `raw` as a mail server that insists on TLS (and checks the certificate) would. */
  async function reportOverTls(port: number, to: string, raw: string) {
    const transport = nodemailer.createTransport({
      host: "127.0.0.1",
      port,
      secure: false,
      requireTLS: true,
      tls: { ca: [cert], servername: DOMAIN },
      connectionTimeout: 5000,
    });
    try {
      return await transport.sendMail({ envelope: { from: "", to: [to] }, raw });
    } finally {
      transport.close();
    }
  }

  it("offers STARTTLS with the operator's certificate: a server that requires TLS delivers its DSN, and it is recorded", async () => {
    const id = await sentEmail("tls@example.com");
    const dsn = postfixDsn(id, "tls@example.com", "failed", "5.1.1", "550 5.1.1 User unknown");
    const sent = await reportOverTls(tlsPort, verp(id), dsn);
    expect(sent.response).toMatch(/^250 /);
    expect((await record(id)).delivery).toMatchObject({ state: "bounced", error_code: "5.1.1" });
  });

  it("still takes mail in clear text (an MX cannot require TLS); without the settings no STARTTLS is offered", async () => {
    const id = await sentEmail("clear@example.com");
    const dsn = postfixDsn(id, "clear@example.com", "failed", "5.2.1", "550 5.2.1 Mailbox disabled");
    const transport = nodemailer.createTransport({ host: "127.0.0.1", port: tlsPort, ignoreTLS: true });
    try {
      expect(
        (await transport.sendMail({ envelope: { from: "", to: [verp(id)] }, raw: dsn })).response,
      ).toMatch(/^250 /);
    } finally {
      transport.close();
    }
    expect((await record(id)).delivery.state).toBe("bounced");
    // The listener without a certificate (the other tests'): a sender requiring TLS cannot deliver.
    await expect(reportOverTls(intakePort, verp(id), dsn)).rejects.toThrow(/STARTTLS/i);
  });

  it("start-up refuses a key that is not the certificate's, and a file it cannot read, naming the variable", async () => {
    const mx = { keyFile: join(dir, "mx-key.pem"), certFile: join(dir, "mx-cert.pem") };
    const other = await selfSigned("other.example", "other");
    expect(() =>
      loadBouncesTls({ BOUNCES_TLS_KEY_FILE: other.keyFile, BOUNCES_TLS_CERT_FILE: mx.certFile }),
    ).toThrow(/BOUNCES_TLS_KEY_FILE: .* is not the private key of /);
    expect(() =>
      loadBouncesTls({ BOUNCES_TLS_KEY_FILE: join(dir, "missing.pem"), BOUNCES_TLS_CERT_FILE: mx.certFile }),
    ).toThrow(/BOUNCES_TLS_KEY_FILE: cannot read .*missing\.pem \(ENOENT\)/);
    const garbage = join(dir, "garbage.pem");
    await writeFile(garbage, "not a certificate");
    expect(() =>
      loadBouncesTls({ BOUNCES_TLS_KEY_FILE: mx.keyFile, BOUNCES_TLS_CERT_FILE: garbage }),
    ).toThrow(
      /^(?![\s\S]*BOUNCES_TLS_KEY_FILE)[\s\S]*BOUNCES_TLS_CERT_FILE: .*garbage\.pem is not a PEM certificate/,
    );
    expect(() =>
      loadBouncesTls({ BOUNCES_TLS_KEY_FILE: garbage, BOUNCES_TLS_CERT_FILE: mx.certFile }),
    ).toThrow(
      /^(?![\s\S]*BOUNCES_TLS_CERT_FILE)[\s\S]*BOUNCES_TLS_KEY_FILE: .*garbage\.pem is not a PEM private key/,
    );
    // Empty files: Node's TLS context would take them as no key and no certificate at all.
    const empty = join(dir, "empty.pem");
    await writeFile(empty, "");
    expect(() => loadBouncesTls({ BOUNCES_TLS_KEY_FILE: empty, BOUNCES_TLS_CERT_FILE: mx.certFile })).toThrow(
      /BOUNCES_TLS_KEY_FILE: .*empty\.pem is not a PEM private key/,
    );
    expect(() => loadBouncesTls({ BOUNCES_TLS_KEY_FILE: mx.keyFile, BOUNCES_TLS_CERT_FILE: empty })).toThrow(
      /BOUNCES_TLS_CERT_FILE: .*empty\.pem is not a PEM certificate/,
    );
  });
});
