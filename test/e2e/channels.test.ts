import PostalMime from "postal-mime";
import { SMTPServer } from "smtp-server";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import webpush from "web-push";
import { eventually } from "../support/harness.js";
import { freePort, type ProcfileStack, startProcfileStack } from "../support/processes.js";
import { type PushService, startPushService, type VerifiedPush } from "../support/push-service.js";

/**
 * E-mail and push as an outside client sees them: the Procfile's processes configured for a
 * real SMTP server and a real push service that this test runs, the SMTP server with
 * smtp-server's defaults (STARTTLS offered with its own self-signed certificate, no AUTH).
 */
const vapid = webpush.generateVAPIDKeys();
const mail: Array<{ from: string | undefined; to: string[]; raw: Buffer }> = [];
let smtp: SMTPServer;
let push: PushService;
let stack: ProcfileStack;
let apiKey = "";

beforeAll(async () => {
  smtp = new SMTPServer({
    authOptional: true,
    logger: false,
    onData(stream, session, callback) {
      const chunks: Buffer[] = [];
      stream.on("data", (chunk: Buffer) => chunks.push(chunk));
      stream.on("end", () => {
        mail.push({
          from: session.envelope.mailFrom ? session.envelope.mailFrom.address : undefined,
          to: session.envelope.rcptTo.map((r) => r.address),
          raw: Buffer.concat(chunks),
        });
        callback();
      });
    },
  });
  const smtpPort = await freePort();
  await new Promise<void>((resolve) => smtp.listen(smtpPort, "127.0.0.1", resolve));
  push = await startPushService();
  stack = await startProcfileStack(inject("databaseUrl"), {
    EMAIL_PROVIDER: "smtp",
    SMTP_HOST: "127.0.0.1",
    SMTP_PORT: String(smtpPort),
    PUSH_PROVIDER: "webpush",
    // The local push service is on loopback: named, and its network opened, as an operator would.
    // 169.254.169.254 is named too, as an operator might by mistake: its address is still refused.
    PUSH_ENDPOINT_HOSTS: `${new URL(push.url).host},169.254.169.254`,
    OUTBOUND_ALLOWED_NETWORKS: "127.0.0.1",
    VAPID_PUBLIC_KEY: vapid.publicKey,
    VAPID_PRIVATE_KEY: vapid.privateKey,
    VAPID_SUBJECT: "mailto:ops@e2e.test",
  });
  const onboarded = await fetch(`${stack.base}/api/v1/onboarding/organizations/e2e-channels`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ organizations: [{ name: "Channels", active: true }] }),
  });
  const { organizations } = (await onboarded.json()) as { organizations: Array<{ apiKey: string }> };
  apiKey = organizations[0]?.apiKey ?? "";
}, 60_000);

afterAll(async () => {
  await stack?.close();
  await push?.close();
  await new Promise<void>((resolve) => (smtp ? smtp.close(() => resolve()) : resolve()));
});

function call(method: string, path: string, body?: unknown) {
  return fetch(`${stack.base}${path}`, {
    method,
    headers: { "content-type": "application/json", "x-api-key": apiKey },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
}

async function accepted(channel: "email" | "push", body: unknown): Promise<string> {
  const response = await call("POST", `/api/v1/notifications/${channel}`, body);
  expect(response.status, await response.clone().text()).toBe(202);
  return ((await response.json()) as { request_id: string }).request_id;
}

async function final(id: string) {
  return eventually(
    async () => {
      const record = (await (await call("GET", `/api/v1/messages/${id}`)).json()) as Record<
        string,
        unknown
      > & {
        payload: Record<string, unknown>;
      };
      return ["success", "failed", "rejected"].includes(record.status as string) ? record : undefined;
    },
    15_000,
    `message ${id} to finish`,
  );
}

describe("e-mail and push through the Procfile's processes", () => {
  it("an e-mail from a template arrives rendered at the SMTP server, and its record holds the request", async () => {
    const created = await call("POST", "/api/v1/templates", {
      name: "order-shipped",
      code: '<html><body><h1 mc:edit="title">Shipped</h1><p>Hi {{name}}, order {{order.id}} is on its way.</p></body></html>',
    });
    expect(created.status).toBe(201);
    const payload = {
      template_name: "order-shipped",
      template_content: [{ name: "title", content: "Your order shipped" }],
      message: {
        from_email: "shop@e2e.test",
        from_name: "E2E Shop",
        subject: "Order {{order.id}} shipped",
        to: [
          { email: "ada@example.com", name: "Ada", type: "to" },
          { email: "ops@example.com", type: "bcc" },
        ],
        merge_language: "handlebars",
        global_merge_vars: [
          { name: "name", content: "Ada" },
          { name: "order", content: { id: "A-42" } },
        ],
      },
    };
    const id = await accepted("email", { payload });
    const record = await final(id);
    expect(record).toMatchObject({
      status: "success",
      channel: "email",
      receiver_id: "ada@example.com",
      sender_id: "shop@e2e.test",
    });
    expect(record.payload).toMatchObject({
      subject: "Order {{order.id}} shipped",
      recipient: "ada@example.com",
      sender: "shop@e2e.test",
      template_fields: payload,
    });

    const received = mail.find((m) => m.raw.toString().includes(id));
    expect(received?.from).toBe("shop@e2e.test");
    expect(received?.to.sort()).toEqual(["ada@example.com", "ops@example.com"]);
    const parsed = await PostalMime.parse(received?.raw ?? "");
    expect(parsed.subject).toBe("Order A-42 shipped");
    expect(parsed.from).toMatchObject({ address: "shop@e2e.test", name: "E2E Shop" });
    expect(parsed.to).toEqual([{ address: "ada@example.com", name: "Ada" }]);
    expect(parsed.html).toContain('<h1 mc:edit="title">Your order shipped</h1>');
    expect(parsed.html).toContain("Hi Ada, order A-42 is on its way.");
    expect(parsed.text).toContain("Hi Ada, order A-42 is on its way.");
  });

  it("an e-mail naming an unknown template is rejected, and nothing is sent", async () => {
    const before = mail.length;
    const id = await accepted("email", {
      payload: {
        template_name: "missing",
        message: { from_email: "shop@e2e.test", subject: "x", to: [{ email: "ada@example.com" }] },
      },
    });
    expect(await final(id)).toMatchObject({ status: "rejected" });
    const events = (await (await call("GET", `/api/v1/messages/${id}/events`)).json()) as {
      events: Array<Record<string, unknown>>;
    };
    expect(events.events.at(-1)).toMatchObject({ type: "rejected", reason: "template_not_found" });
    expect(mail.length).toBe(before);
  });

  it("a push arrives encrypted and signed at the push service; decrypted it is what was sent", async () => {
    const subscription = push.createSubscription();
    const id = await accepted("push", {
      payload: { to: subscription, title: "Hello", body: "From the Procfile", data: { n: 1 }, ttl: 60 },
    });
    const record = await final(id);
    expect(record).toMatchObject({
      status: "success",
      channel: "push",
      receiver_id: subscription.endpoint,
      sender_id: "mailto:ops@e2e.test",
    });
    expect(record.payload).toMatchObject({
      subject: "Hello",
      message: "From the Procfile",
      template_fields: null,
    });
    const [received] = push.received().filter((p) => subscription.endpoint.endsWith(p.path));
    expect(received?.verified).toBe(true);
    const verified = received as VerifiedPush;
    expect(JSON.parse(verified.plaintext)).toEqual({
      title: "Hello",
      body: "From the Procfile",
      data: { n: 1 },
      message_id: id,
    });
    expect(verified.ttl).toBe(60);
    expect(verified.vapid).toEqual({ subject: "mailto:ops@e2e.test", publicKey: vapid.publicKey });
  });

  it("a push to a subscription the push service says is gone (410) is rejected", async () => {
    const subscription = push.createSubscription();
    push.respondWith(subscription.endpoint, { status: 410 });
    const id = await accepted("push", { payload: { to: subscription, title: "t", body: "b" } });
    expect(await final(id)).toMatchObject({ status: "rejected", retry_count: 0 });
  });

  it("a push to the metadata address is refused by the worker, and its history says only why", async () => {
    const subscription = push.createSubscription();
    const endpoint = "https://169.254.169.254/latest/meta-data/iam/security-credentials/";
    const id = await accepted("push", {
      payload: { to: { ...subscription, endpoint }, title: "t", body: "b" },
    });
    expect(await final(id)).toMatchObject({ status: "rejected", retry_count: 0 });
    const { events } = (await (await call("GET", `/api/v1/messages/${id}/events`)).json()) as {
      events: Array<{ type: string; error?: unknown }>;
    };
    expect(events.at(-1)).toEqual(
      expect.objectContaining({
        type: "rejected",
        error: {
          class: "rejected",
          code: "address_not_allowed",
          message: "Not sent: the address of the push service is not allowed",
        },
      }),
    );
  });
});
