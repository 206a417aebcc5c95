import nodemailer from "nodemailer";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { postfixDsn, yahooArf } from "../support/email-reports.js";
import { FakeTwilio, TWILIO_ACCOUNT_SID, TWILIO_AUTH_TOKEN } from "../support/fake-twilio.js";
import { eventually } from "../support/harness.js";
import {
  bouncesListening,
  freePort,
  type ProcfileStack,
  procfile,
  type RunningProcess,
  runProcess,
  startProcfileStack,
} from "../support/processes.js";
import { PASSWORD, TestSmtpServer, USER } from "../support/smtp-server.js";

/**
 * Receipts and the suppression list as an outside client sees them (issue 17's check): the
 * Procfile's web, worker and bounces processes, with a Twilio stand-in that posts status callbacks
 * signed by the `twilio` package to the web process's PUBLIC_BASE_URL (and forged ones), and an
 * SMTP sink whose mail comes back as a real DSN or ARF report sent to the bounces process.
 */
const DOMAIN = "bounces.e2e.test";
let twilio: FakeTwilio;
let smtp: TestSmtpServer;
let stack: ProcfileStack;
let bounces: RunningProcess;
let bouncesPort = 0;
let apiKey = "";

beforeAll(async () => {
  const port = await freePort();
  const publicBaseUrl = `http://127.0.0.1:${port}`;
  twilio = await FakeTwilio.start(publicBaseUrl);
  smtp = await TestSmtpServer.start();
  bouncesPort = await freePort();
  stack = await startProcfileStack(inject("databaseUrl"), {
    PORT: String(port),
    PUBLIC_BASE_URL: `${publicBaseUrl}/`,
    SMS_PROVIDER: "twilio",
    TWILIO_ACCOUNT_SID,
    TWILIO_AUTH_TOKEN,
    TWILIO_BASE_URL: twilio.baseUrl,
    EMAIL_PROVIDER: "smtp",
    SMTP_HOST: "127.0.0.1",
    SMTP_PORT: String(smtp.port),
    SMTP_USER: USER,
    SMTP_PASSWORD: PASSWORD,
    SMTP_TLS_REJECT_UNAUTHORIZED: "false",
    BOUNCE_DOMAIN: DOMAIN,
  });
  bounces = runProcess(procfile().bounces ?? "missing-bounces", {
    DATABASE_URL: stack.databaseUrl,
    BOUNCE_DOMAIN: DOMAIN,
    BOUNCES_PORT: String(bouncesPort),
  });
  const onboarded = await fetch(`${stack.base}/api/v1/onboarding/organizations/e2e-receipts`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ organizations: [{ name: "Receipts", active: true }] }),
  });
  const { organizations } = (await onboarded.json()) as { organizations: Array<{ apiKey: string }> };
  apiKey = organizations[0]?.apiKey ?? "";
  const template = await call("POST", "/api/v1/templates", { name: "hello", code: "<p>Hello {{name}}</p>" });
  expect(template.status, await template.clone().text()).toBe(201);
  await bouncesListening(bounces);
}, 60_000);

afterAll(async () => {
  await bounces?.stop("SIGKILL");
  await stack?.close();
  await twilio?.close();
  await smtp?.close();
});

function call(method: string, path: string, body?: unknown) {
  return fetch(`${stack.base}${path}`, {
    method,
    headers: { "content-type": "application/json", "x-api-key": apiKey },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
}

interface RecordBody {
  status: string;
  delivery: { state: string; error_code: string | null };
}

async function send(channel: "sms" | "email", payload: unknown): Promise<string> {
  const response = await call("POST", `/api/v1/notifications/${channel}`, { payload });
  expect(response.status, await response.clone().text()).toBe(202);
  return ((await response.json()) as { request_id: string }).request_id;
}

async function record(id: string): Promise<RecordBody> {
  const response = await call("GET", `/api/v1/messages/${id}`);
  expect(response.status).toBe(200);
  return (await response.json()) as RecordBody;
}

async function final(id: string): Promise<RecordBody> {
  return eventually(
    async () => {
      const found = await record(id);
      return ["success", "failed", "rejected"].includes(found.status) ? found : undefined;
    },
    15_000,
    `message ${id} to finish`,
  );
}

async function history(id: string): Promise<Array<Record<string, unknown>>> {
  const response = await call("GET", `/api/v1/messages/${id}/events`);
  expect(response.status).toBe(200);
  const body = (await response.json()) as
    | { events?: Array<Record<string, unknown>> }
    | Array<Record<string, unknown>>;
  return Array.isArray(body) ? body : (body.events ?? []);
}

async function deliveryState(id: string, state: string): Promise<RecordBody> {
  return eventually(
    async () => {
      const found = await record(id);
      return found.delivery.state === state ? found : undefined;
    },
    15_000,
    `message ${id}'s delivery to be ${state}`,
  );
}

async function suppressions(query: string): Promise<Array<{ reason: string; message_id: string }>> {
  const response = await call("GET", `/api/v1/suppressions${query}`);
  expect(response.status).toBe(200);
  return ((await response.json()) as { suppressions: Array<{ reason: string; message_id: string }> })
    .suppressions;
}

/** Sends a report to the bounces process over SMTP, as a reporting mail server does (`MAIL FROM:<>`). */
async function report(to: string, raw: string) {
  const transport = nodemailer.createTransport({
    host: "127.0.0.1",
    port: bouncesPort,
    secure: false,
    ignoreTLS: true,
  });
  try {
    return await transport.sendMail({ envelope: { from: "", to: [to] }, raw });
  } finally {
    transport.close();
  }
}

const email = (to: string) => ({
  template_name: "hello",
  message: {
    from_email: "hello@acme.test",
    subject: "Hello",
    to: [{ email: to, type: "to" }],
    global_merge_vars: [{ name: "name", content: "Ada" }],
  },
});

describe("SMS receipts: Twilio's status callbacks to the web process", () => {
  it("signed callbacks set the delivery state in order; a forged one is refused and changes nothing; a late `sent` does not move it back", async () => {
    const to = "+14155550181";
    const id = await send("sms", { to, body: "Your code is 123456" });
    expect((await final(id)).status).toBe("success");
    const sms = twilio.sentTo(to);
    expect(sms?.fields.StatusCallback).toBe(`${stack.base}/callbacks/twilio/sms/${id}`);
    if (!sms) throw new Error("Twilio got no SMS");

    const forged = await twilio.callback(sms, "delivered", { token: "not-the-auth-token" });
    expect(forged.status).toBe(403);
    const unsigned = await twilio.callback(sms, "delivered", { signature: null });
    expect(unsigned.status).toBe(403);
    const tampered = await twilio.callback(sms, "sent", { tamper: { MessageStatus: "delivered" } });
    expect(tampered.status).toBe(403);
    expect((await record(id)).delivery.state).toBe("unknown");

    expect((await twilio.callback(sms, "sent")).status).toBe(200);
    expect((await twilio.callback(sms, "delivered")).status).toBe(200);
    expect((await twilio.callback(sms, "delivered")).status).toBe(200);
    expect((await twilio.callback(sms, "sent")).status).toBe(200);
    const delivered = await deliveryState(id, "delivered");
    expect(delivered.status).toBe("success");
    const receipts = (await history(id)).filter((event) => event.type === "receipt");
    expect(receipts.map((event) => event.state)).toEqual(["sent", "delivered"]);
  });

  it("an opt-out (21610) puts the number on the suppression list, and it is never sent to again", async () => {
    const to = "+14155550182";
    const id = await send("sms", { to, body: "Your code is 654321" });
    expect((await final(id)).status).toBe("success");
    const sms = twilio.sentTo(to);
    if (!sms) throw new Error("Twilio got no SMS");
    expect((await twilio.callback(sms, "undelivered", { extra: { ErrorCode: "21610" } })).status).toBe(200);
    expect((await deliveryState(id, "undelivered")).delivery.error_code).toBe("21610");
    expect((await suppressions("?channel=sms&reason=stop")).map((s) => s.message_id)).toContain(id);

    const again = await send("sms", { to, body: "Your code is 111111" });
    expect((await final(again)).status).toBe("rejected");
    expect((await history(again)).at(-1)).toMatchObject({ type: "rejected", reason: "recipient_suppressed" });
    expect(twilio.sent.filter((sent) => sent.fields.To === to)).toHaveLength(1);
  });
});

describe("e-mail receipts: reports to the bounces process", () => {
  it("a DSN (5.1.1) to the message's return path bounces it and suppresses the address; the next e-mail to it is not sent", async () => {
    const to = "gone@example.com";
    const id = await send("email", email(to));
    expect((await final(id)).status).toBe("success");
    const sent = smtp.received.find((mail) => mail.rcptTo.includes(to));
    expect(sent?.mailFrom).toBe(`bounce+${id}@${DOMAIN}`);

    const answer = await report(
      `bounce+${id}@${DOMAIN}`,
      postfixDsn(
        `bounce+${id}@${DOMAIN}`,
        id,
        to,
        "failed",
        "5.1.1",
        "550 5.1.1 <gone@example.com>: Recipient address rejected: User unknown",
      ),
    );
    expect(answer.response).toMatch(/^250 /);
    expect((await deliveryState(id, "bounced")).delivery.error_code).toBe("5.1.1");
    expect((await suppressions("?channel=email&reason=hard_bounce")).map((s) => s.message_id)).toContain(id);

    const again = await send("email", email(to));
    expect((await final(again)).status).toBe("rejected");
    expect((await history(again)).at(-1)).toMatchObject({ type: "rejected", reason: "recipient_suppressed" });
    expect(smtp.received.filter((mail) => mail.rcptTo.includes(to))).toHaveLength(1);
  });

  it("an ARF abuse report makes the delivery `complained` and suppresses the address", async () => {
    const to = "annoyed@example.com";
    const id = await send("email", email(to));
    expect((await final(id)).status).toBe("success");
    const answer = await report(`bounce+${id}@${DOMAIN}`, yahooArf(`bounce+${id}@${DOMAIN}`, id, to));
    expect(answer.response).toMatch(/^250 /);
    await deliveryState(id, "complained");
    expect((await suppressions("?channel=email&reason=complaint")).map((s) => s.message_id)).toContain(id);
  });

  it("a report naming another message in its body changes only the message its return path names", async () => {
    const [first, second] = [
      await send("email", email("ada@example.com")),
      await send("email", email("bob@example.com")),
    ];
    await Promise.all([final(first), final(second)]);
    const answer = await report(
      `bounce+${first}@${DOMAIN}`,
      postfixDsn(
        `bounce+${second}@${DOMAIN}`,
        second,
        "bob@example.com",
        "failed",
        "5.1.1",
        "550 5.1.1 User unknown here",
      ),
    );
    expect(answer.response).toMatch(/^250 /);
    await deliveryState(first, "bounced");
    expect((await record(second)).delivery.state).toBe("unknown");
  });
});
