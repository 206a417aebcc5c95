import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { createEmailProvider } from "../../../src/channels/email/providers/index.js";
import type { EmailProvider } from "../../../src/channels/email/providers/provider.js";
import {
  createHarness,
  createTemplate,
  eventually,
  onboard,
  sendNotification,
} from "../../support/harness.js";
import { PASSWORD, smtpError, TestSmtpServer, USER } from "../../support/smtp-server.js";
import { dataOf, eventsOf, expectFinishedHistory, type StoredEvent } from "./history.js";

/**
 * EMAIL_PROVIDERS=smtp:main,smtp:relay2 (docs/decisions/0046) through the real worker processor:
 * a server's 4xx refuses the message, so the attempt moves to the next server, as does a refusal
 * of our account there (credentials, relaying denied); a 550 refuses the
 * recipient for good on any server, so it never moves; a server gone silent after the message's
 * data may have taken it, so the attempt ends there and the retry goes to the other server.
 */

let main: TestSmtpServer;
let relay2: TestSmtpServer;
let provider: EmailProvider;
let h: ReturnType<typeof createHarness>;
let apiKey = "";

beforeAll(async () => {
  main = await TestSmtpServer.start();
  relay2 = await TestSmtpServer.start();
  const server = (name: string, port: number) => ({
    [`SMTP_${name}_HOST`]: "127.0.0.1",
    [`SMTP_${name}_PORT`]: String(port),
    [`SMTP_${name}_USER`]: USER,
    [`SMTP_${name}_PASSWORD`]: PASSWORD,
    [`SMTP_${name}_TIMEOUT_MS`]: "500",
  });
  h = createHarness({
    EMAIL_PROVIDERS: "smtp:main,smtp:relay2",
    ...server("MAIN", main.port),
    ...server("RELAY2", relay2.port),
    // Every attempt tries the main server first here: its breaker stays closed.
    PROVIDER_BREAKER_FAILURES: "1000",
  });
  provider = createEmailProvider(h.config);
  const organization = await onboard(h);
  apiKey = organization.apiKey;
  await createTemplate(h, apiKey, { name: "welcome", code: "<p>Hello *|FNAME|*</p>" });
  h.startWorker({ providers: { email: provider } });
});
beforeEach(() => {
  main.reset();
  relay2.reset();
});
afterAll(async () => {
  await h.close();
  await provider.close?.();
  await main.close();
  await relay2.close();
});

async function sendAndFinish(): Promise<StoredEvent[]> {
  const response = await sendNotification(h, "email", apiKey, {
    payload: {
      template_name: "welcome",
      message: {
        from_email: "hello@acme.test",
        subject: "Welcome",
        to: [{ email: "ada@example.com", type: "to" }],
        global_merge_vars: [{ name: "FNAME", content: "Ada" }],
      },
    },
  });
  expect(response.status).toBe(202);
  const id = ((await response.json()) as { request_id: string }).request_id;
  const events = await eventually(
    async () => {
      const all = await eventsOf(h.db, id);
      return all.some((e) => ["success", "failed", "rejected"].includes(e.type)) ? all : undefined;
    },
    15_000,
    "the e-mail final",
  );
  await expectFinishedHistory(h.db, id);
  return events;
}

describe("given two SMTP servers in EMAIL_PROVIDERS", () => {
  it("the first refusing our credentials (535) moves the attempt to the second: the account, not the recipient, was refused", async () => {
    // First in the file: the transports pool their connections, and AUTH is only sent on a new one.
    main.scenario = { auth: () => smtpError(535, "5.7.8 Authentication credentials invalid") };
    const events = await sendAndFinish();
    expect(events.find((e) => e.type === "success")?.data).toMatchObject({
      attempt: 1,
      provider: "smtp:relay2",
      failovers: [{ provider: "smtp:main", error: { class: "permanent", code: "smtp_535" } }],
    });
    expect(relay2.received).toHaveLength(1);
  });

  it("a 4xx from the first moves the attempt to the second: one e-mail, sent by the second", async () => {
    main.scenario = { rcpt: () => smtpError(451, "4.3.0 Try again later") };
    const events = await sendAndFinish();
    expect(events.find((e) => e.type === "success")?.data).toMatchObject({
      attempt: 1,
      provider: "smtp:relay2",
      failovers: [{ provider: "smtp:main", error: { class: "transient", code: "smtp_451" } }],
    });
    expect(main.received).toHaveLength(0);
    expect(relay2.received).toHaveLength(1);
  });

  it("the first denying relaying (5.7.1 to RCPT TO) moves the attempt to the second", async () => {
    main.scenario = { rcpt: () => smtpError(554, "5.7.1 Relay access denied") };
    const events = await sendAndFinish();
    expect(events.find((e) => e.type === "success")?.data).toMatchObject({
      attempt: 1,
      provider: "smtp:relay2",
      failovers: [{ provider: "smtp:main", error: { code: "smtp_554" } }],
    });
    expect(main.received).toHaveLength(0);
    expect(relay2.received).toHaveLength(1);
  });

  it("a 550 (a recipient refused for good) never moves to the second server", async () => {
    main.scenario = { rcpt: () => smtpError(550, "5.1.1 No such user") };
    const events = await sendAndFinish();
    expect(events.at(-1)).toMatchObject({
      type: "failed",
      data: { reason: "permanent_error", provider: "smtp:main", error: { code: "smtp_550" } },
    });
    expect(dataOf(events.at(-1))).not.toHaveProperty("failovers");
    expect(relay2.received).toHaveLength(0);
  });

  it("the first gone silent after the message's data ends the attempt; the retry goes to the second", async () => {
    main.scenario = { data: () => "hang" };
    const events = await sendAndFinish();
    const retry = events.find((e) => e.type === "pending" && dataOf(e).kind === "retry_scheduled");
    expect(retry?.data).toMatchObject({ attempt: 1, provider: "smtp:main", error: { code: "timeout" } });
    expect(events.find((e) => e.type === "success")?.data).toMatchObject({
      attempt: 2,
      provider: "smtp:relay2",
    });
    expect(relay2.received).toHaveLength(1);
  });
});
