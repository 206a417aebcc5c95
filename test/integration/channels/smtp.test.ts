import type { AddressInfo } from "node:net";
import { createServer, type Server, type Socket } from "node:net";
import PostalMime, { type Email } from "postal-mime";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import type { EmailMessage } from "../../../src/channels/email/providers/provider.js";
import {
  SmtpEmailProvider,
  type SmtpEmailProviderOptions,
} from "../../../src/channels/email/providers/smtp.js";
import type { DeliveryOutcome } from "../../../src/domain/delivery-outcome.js";

import {
  PASSWORD,
  PLAIN_TOKEN,
  QUEUE_ID,
  smtpError,
  TestSmtpServer,
  USER,
} from "../../support/smtp-server.js";

/** A TCP server that accepts connections and never says a word. */
class SilentServer {
  readonly #sockets = new Set<Socket>();
  readonly #server: Server = createServer((socket) => {
    this.#sockets.add(socket);
    socket.on("error", () => {});
    socket.on("close", () => this.#sockets.delete(socket));
  });

  static async start(): Promise<SilentServer> {
    const silent = new SilentServer();
    await new Promise<void>((resolve) => silent.#server.listen(0, "127.0.0.1", resolve));
    return silent;
  }

  get port(): number {
    return (this.#server.address() as AddressInfo).port;
  }

  async close(): Promise<void> {
    for (const socket of this.#sockets) socket.destroy();
    await new Promise<void>((resolve) => this.#server.close(() => resolve()));
  }
}

/** A port nothing listens on: bind one, then let it go. */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

const email: EmailMessage = {
  messageId: "0b9d7a52-5d3c-4f7e-9a51-2f3e5f1c0d11",
  from: { email: "hello@notify.example.com", name: "Example Shop" },
  to: [{ email: "ada@example.org", name: "Ada Lovelace" }],
  cc: [{ email: "bob@example.org" }],
  bcc: [{ email: "audit@example.net" }],
  subject: "Grüße – Ihre Bestellung ✓ 注文",
  html: "<p>Hello <b>Ada</b> &amp; welcome</p>",
  text: "Hello Ada & welcome",
  attempt: 1,
};

/**
 * A failed outcome: `message` is the one tenants read (ours: no server host or port, nothing the
 * server said); `detail` is the server's reply, for the worker's log.
 */
function failure(
  cls: string,
  code: string,
  message: unknown = expect.any(String),
  detail: unknown = expect.any(String),
) {
  return { ok: false, provider: "smtp", error: { class: cls, code, message }, detail };
}

/**
 * A failure that proves the server did not take the message (a 4xx, no connection): a provider
 * list may try another server within the same attempt (docs/decisions/0046).
 */
function untaken(...args: Parameters<typeof failure>) {
  return { ...failure(...args), notTaken: true };
}

/**
 * A permanent failure in which the server refused the account (`account`: credentials) or this
 * message on this account (`sender`: relaying or the sender not allowed), not the recipient: it
 * took nothing, and a provider list may try another server within the attempt (decision 0046).
 */
function refusedByAccount(
  accountRefusal: "account" | "sender",
  ...args: Parameters<typeof failure> extends [string, ...infer R] ? R : never
) {
  return { ...failure("permanent", ...args), notTaken: true, accountRefusal };
}

describe("SmtpEmailProvider against a real SMTP server", () => {
  let server: TestSmtpServer;
  const providers: SmtpEmailProvider[] = [];

  beforeAll(async () => {
    server = await TestSmtpServer.start();
  });
  afterEach(async () => {
    await Promise.all(providers.splice(0).map((p) => p.close()));
    server.reset();
  });
  afterAll(() => server.close());

  function provider(overrides: Partial<SmtpEmailProviderOptions> = {}): SmtpEmailProvider {
    const p = new SmtpEmailProvider({
      host: "127.0.0.1",
      port: server.port,
      secure: false,
      requireTls: false,
      user: USER,
      password: PASSWORD,
      timeoutMs: 5000,
      pool: false,
      ...overrides,
    });
    providers.push(p);
    return p;
  }

  /** Sends, and checks the one thing every outcome must satisfy: the password never leaks. */
  async function send(
    p: SmtpEmailProvider = provider(),
    message: EmailMessage = email,
  ): Promise<DeliveryOutcome> {
    const outcome = await p.send(message);
    const serialised = JSON.stringify(outcome);
    expect(serialised).not.toContain(PASSWORD);
    expect(serialised).not.toContain(PLAIN_TOKEN);
    return outcome;
  }

  async function parsed(index = 0): Promise<Email> {
    const received = server.received[index];
    if (!received) throw new Error(`no message #${index} was received`);
    return PostalMime.parse(received.raw);
  }

  it("is named smtp, or as its provider list's account", () => {
    expect(provider().name).toBe("smtp");
    expect(provider({ name: "smtp:relay2" }).name).toBe("smtp:relay2");
  });

  it("with a return path, the envelope sender is bounce+{message id}@BOUNCE_DOMAIN, to every recipient, bcc in no header", async () => {
    const p = provider({ returnPath: { domain: "bounces.notify.example.com", localPart: "rt" } });
    expect(await send(p)).toMatchObject({ ok: true });
    expect(server.received[0]?.mailFrom).toBe(`rt+${email.messageId}@bounces.notify.example.com`);
    expect(server.received[0]?.rcptTo.sort()).toEqual([
      "ada@example.org",
      "audit@example.net",
      "bob@example.org",
    ]);
    const mail = await parsed();
    expect(mail.from).toMatchObject({ address: "hello@notify.example.com", name: "Example Shop" });
    expect(mail.headers.some((header) => header.key === "bcc")).toBe(false);
    expect(server.received[0]?.raw.toString()).not.toContain("audit@example.net");
  });

  it("an accepted message is a success carrying the server's queue id", async () => {
    expect(await send()).toStrictEqual({ ok: true, provider: "smtp", providerMessageId: QUEUE_ID });
  });

  it("a 250 reply without a queue id falls back to the Message-ID", async () => {
    server.scenario = { accepted: "OK: message accepted" };
    expect(await send()).toStrictEqual({
      ok: true,
      provider: "smtp",
      providerMessageId: `<${email.messageId}@notify.example.com>`,
    });
  });

  it("an Exim-style reply's id is the queue id", async () => {
    server.scenario = { accepted: "OK id=1tq0Xx-0000Ab-2C" };
    expect(await send()).toMatchObject({ ok: true, providerMessageId: "1tq0Xx-0000Ab-2C" });
  });

  it("the message carries From with its name, To, Cc, the subject, and both parts", async () => {
    await send();
    const mail = await parsed();
    expect(mail.from).toEqual({ name: "Example Shop", address: "hello@notify.example.com" });
    expect(mail.to).toEqual([{ name: "Ada Lovelace", address: "ada@example.org" }]);
    expect(mail.cc).toEqual([{ name: "", address: "bob@example.org" }]);
    expect(mail.subject).toBe(email.subject);
    expect(mail.html?.trim()).toBe(email.html);
    expect(mail.text?.trim()).toBe(email.text);
  });

  it("bcc recipients are in the envelope but in no header", async () => {
    await send();
    const [received] = server.received;
    expect(received?.mailFrom).toBe("hello@notify.example.com");
    expect(received?.rcptTo).toEqual(["ada@example.org", "bob@example.org", "audit@example.net"]);
    const mail = await parsed();
    expect(mail.bcc).toBeUndefined();
    expect(mail.headers.map((h) => h.key)).not.toContain("bcc");
    expect(received?.raw.toString("utf8")).not.toContain("audit@example.net");
  });

  it("the message carries X-Notification-Id and a Message-ID in the sender's domain", async () => {
    await send();
    const mail = await parsed();
    expect(mail.messageId).toBe(`<${email.messageId}@notify.example.com>`);
    expect(mail.headers.find((h) => h.key === "x-notification-id")?.value).toBe(email.messageId);
  });

  it("the Message-ID is the same on every attempt, so receivers can drop a duplicate", async () => {
    const p = provider();
    await send(p, { ...email, attempt: 1 });
    await send(p, { ...email, attempt: 2 });
    expect(server.received).toHaveLength(2);
    expect((await parsed(0)).messageId).toBe((await parsed(1)).messageId);
  });

  it("a message with no cc or bcc has no Cc header", async () => {
    await send(provider(), { ...email, cc: [], bcc: [] });
    expect((await parsed()).headers.map((h) => h.key)).not.toContain("cc");
  });

  it("a recipient refused while another is accepted is still a success", async () => {
    server.scenario = {
      rcpt: (address) =>
        address === "bob@example.org" ? smtpError(550, "5.1.1 Mailbox unavailable") : undefined,
    };
    expect(await send()).toStrictEqual({ ok: true, provider: "smtp", providerMessageId: QUEUE_ID });
    expect(server.received[0]?.rcptTo).toEqual(["ada@example.org", "audit@example.net"]);
  });

  it("a 4xx for every recipient is transient, coded by the reply, and not taken", async () => {
    server.scenario = { rcpt: () => smtpError(451, "4.3.0 Try again later") };
    expect(await send()).toStrictEqual(
      untaken(
        "transient",
        "smtp_451",
        "The SMTP server answered RCPT TO with 451",
        expect.stringContaining("451 4.3.0 Try again later"),
      ),
    );
    expect(server.received).toHaveLength(0);
  });

  it("a 5xx for every recipient is permanent", async () => {
    server.scenario = { rcpt: () => smtpError(550, "5.1.1 Mailbox unavailable") };
    expect(await send()).toStrictEqual(
      failure(
        "permanent",
        "smtp_550",
        "The SMTP server answered RCPT TO with 550",
        expect.stringContaining("550 5.1.1 Mailbox unavailable"),
      ),
    );
  });

  it("with some recipients deferred and the others refused for good, the message is transient", async () => {
    server.scenario = {
      rcpt: (address) =>
        address === "bob@example.org"
          ? smtpError(452, "4.2.2 Mailbox full")
          : smtpError(550, "5.1.1 No such user"),
    };
    expect(await send()).toStrictEqual(untaken("transient", "smtp_452"));
  });

  it("a reply quoting the recipient (Postfix's 550) reaches the log's detail without it, never the message", async () => {
    server.scenario = {
      rcpt: (address) => smtpError(550, `5.1.1 <${address}>: Recipient address rejected: User unknown`),
    };
    const outcome = await send();
    expect(outcome).toStrictEqual(
      failure(
        "permanent",
        "smtp_550",
        "The SMTP server answered RCPT TO with 550",
        expect.stringMatching(/RCPT TO: 550 5\.1\.1 <\[recipient\]>: Recipient address rejected/),
      ),
    );
    if (outcome.ok) throw new Error("unreachable");
    expect(JSON.stringify(outcome.error)).not.toMatch(/127\.0\.0\.1|User unknown/);
    expect(JSON.stringify(outcome)).not.toMatch(/example\.org|example\.net/);
  });

  it("a 4xx after DATA is transient, and not taken (a 4xx reply refuses the message)", async () => {
    server.scenario = { data: () => smtpError(452, "4.3.1 Insufficient system storage") };
    expect(await send()).toStrictEqual(
      untaken(
        "transient",
        "smtp_452",
        "The SMTP server answered DATA with 452",
        expect.stringContaining("4.3.1 Insufficient system storage"),
      ),
    );
  });

  it("a 5xx after DATA is permanent", async () => {
    server.scenario = { data: () => smtpError(554, "5.7.1 Message rejected as spam") };
    expect(await send()).toStrictEqual(
      failure(
        "permanent",
        "smtp_554",
        "The SMTP server answered DATA with 554",
        expect.stringContaining("5.7.1 Message rejected as spam"),
      ),
    );
  });

  it("wrong credentials get a 535, which is permanent, refuses the account itself, and does not echo the password", async () => {
    const wrong = "pw_wrong_000000000000";
    const outcome = await send(provider({ password: wrong }));
    expect(outcome).toStrictEqual(
      refusedByAccount(
        "account",
        "smtp_535",
        "The SMTP server answered AUTH PLAIN with 535",
        expect.stringContaining("5.7.8 Authentication credentials invalid"),
      ),
    );
    expect(JSON.stringify(outcome)).not.toContain(wrong);
  });

  it("a server reply that echoes the password is redacted", async () => {
    server.scenario = { auth: (_user, password) => smtpError(535, `bad password ${password}`) };
    const outcome = await send();
    expect(outcome).toMatchObject({
      error: { code: "smtp_535" },
      detail: expect.stringContaining("bad password [redacted]"),
    });
  });

  it("no credentials where the server requires them is permanent (530), and refuses the account itself", async () => {
    expect(await send(provider({ user: undefined, password: undefined }))).toStrictEqual(
      refusedByAccount("account", "smtp_530"),
    );
  });

  it("relaying denied (5.7.1 to RCPT TO) is permanent, and this server's refusal of the message: another may take it", async () => {
    server.scenario = { rcpt: (address) => smtpError(554, `5.7.1 <${address}>: Relay access denied`) };
    expect(await send()).toStrictEqual(
      refusedByAccount(
        "sender",
        "smtp_554",
        "The SMTP server answered RCPT TO with 554",
        expect.stringContaining("5.7.1 <[recipient]>: Relay access denied"),
      ),
    );
  });

  it("a refused connection is a transient network error, and not taken", async () => {
    const port = await closedPort();
    expect(await send(provider({ port }))).toStrictEqual(
      untaken(
        "transient",
        "network_error",
        "Could not reach the SMTP server",
        expect.stringMatching(new RegExp(`^SMTP server 127\\.0\\.0\\.1:${port}: .*ECONNREFUSED`)),
      ),
    );
  });

  it("a server that accepts the connection but never greets is transient within about the time-out", async () => {
    const silent = await SilentServer.start();
    try {
      const started = performance.now();
      const outcome = await send(provider({ port: silent.port, timeoutMs: 300 }));
      // The greeting and the socket's idle time-out both run out at 300 ms; either may report
      // (only the greeting's proves no mail transaction began).
      expect(outcome).toMatchObject(
        failure(
          "transient",
          "timeout",
          expect.stringMatching(
            /^The SMTP server did not answer within 300 ms \(waiting for (the greeting|a reply)\)$/,
          ),
        ),
      );
      if (outcome.ok) throw new Error("unreachable");
      expect(Boolean("notTaken" in outcome && outcome.notTaken)).toBe(
        outcome.error.message.includes("the greeting"),
      );
      expect(performance.now() - started).toBeLessThan(2000);
    } finally {
      await silent.close();
    }
  });

  it("a server that goes silent after the message is sent is transient within about the time-out", async () => {
    server.scenario = { data: () => "hang" };
    const started = performance.now();
    // Strictly: no `notTaken`, since the server may have taken the message it was sent.
    expect(await send(provider({ timeoutMs: 300 }))).toStrictEqual(failure("transient", "timeout"));
    expect(performance.now() - started).toBeLessThan(2000);
  });

  it("a pooled provider reuses one connection for several messages", async () => {
    const p = provider({ pool: true });
    const outcomes = [await send(p), await send(p, { ...email, messageId: "second" })];
    expect(outcomes).toEqual([
      { ok: true, provider: "smtp", providerMessageId: QUEUE_ID },
      { ok: true, provider: "smtp", providerMessageId: QUEUE_ID },
    ]);
    expect(server.received).toHaveLength(2);
    expect(server.received[0]?.sessionId).toBe(server.received[1]?.sessionId);
  });

  it("a pooled provider opens at most maxConnections sessions for concurrent sends", async () => {
    const p = provider({ pool: true, maxConnections: 2 });
    const outcomes = await Promise.all(
      Array.from({ length: 8 }, (_, i) => send(p, { ...email, messageId: `concurrent-${i}` })),
    );
    expect(outcomes.every((o) => o.ok)).toBe(true);
    expect(server.received).toHaveLength(8);
    expect(new Set(server.received.map((r) => r.sessionId)).size).toBeLessThanOrEqual(2);
  });

  it("a pooled provider classifies failures the same way", async () => {
    server.scenario = { rcpt: () => smtpError(550, "5.1.1 Mailbox unavailable") };
    expect(await send(provider({ pool: true }))).toStrictEqual(failure("permanent", "smtp_550"));
  });

  it("a message nodemailer cannot send at all (no recipients) is permanent", async () => {
    expect(await send(provider(), { ...email, to: [], cc: [], bcc: [] })).toStrictEqual(
      failure("permanent", "invalid_message"),
    );
  });
});
