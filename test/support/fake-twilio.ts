import { randomUUID } from "node:crypto";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { SegmentedMessage } from "sms-segments-calculator";
import twilio from "twilio";

/**
 * A stand-in for Twilio: its Messages endpoint (answered as Twilio answers, or by an outage a test
 * switches on: a 503, a message made and then a 503, a hang, refused connections), and its status
 * callbacks, posted the way Twilio posts them and signed with the official `twilio` package's
 * helper (never with our own code). The callbacks go to the service in process (`attach`) or, in
 * the end-to-end tests, over HTTP to the URL the service gave as `StatusCallback`.
 */

export const TWILIO_ACCOUNT_SID = "AC0123456789abcdef0123456789abcdef";
export const TWILIO_AUTH_TOKEN = "tok_3f9c2a7be1d64c58a0f1e2d3c4b5a697";

export interface SentSms {
  sid: string;
  fields: Record<string, string>;
}

/**
 * How the fake answers the Messages endpoint: as Twilio does (`ok`), with a 503 (`unavailable`),
 * with a 503 after making the message (`made_then_unavailable`: an edge in front of Twilio that
 * answers 503 once Twilio created it, which is why a 503 proves nothing), never (`hang`: the
 * request is read and left unanswered), or not at all (`refuse`: the listener is closed, so
 * connections are refused).
 */
export type FakeTwilioMode = "ok" | "unavailable" | "made_then_unavailable" | "hang" | "refuse";

/** One request to the Messages endpoint, whatever the answer: the ground truth of who got what. */
export interface ReceivedSms {
  /** Our message id, from its StatusCallback (needs PUBLIC_BASE_URL), else undefined. */
  messageId: string | undefined;
  fields: Record<string, string>;
  /** Date.now() when the request's body was read. */
  receivedAt: number;
  /** 201 (a message made), 503, or `hung` (never answered). */
  answer: 201 | 503 | "hung";
  /** Whether the fake made a message for it (a 201, or `made_then_unavailable`'s 503). */
  made: boolean;
}

/** Answers a request as an in-process app does (Hono's `app.request`). */
type InProcessApp = { request(path: string, init: RequestInit): Response | Promise<Response> };

export class FakeTwilio {
  readonly sent: SentSms[] = [];
  /** Every request to the Messages endpoint, answered or not (none reach it while it refuses). */
  readonly received: ReceivedSms[] = [];
  /** Told of each request as it is recorded, before it is answered (a fake in a child process logs it). */
  onReceived: ((request: ReceivedSms) => void) | undefined;
  /** Runs before the 201 is answered (a callback that beats our own record of the success). */
  beforeAnswer: ((sms: SentSms) => Promise<void>) | undefined;
  /** Told once a 201 has been handed to the socket (a fake in a child process logs it). */
  afterAnswer: ((sms: SentSms) => void) | undefined;
  /**
   * The Message resource's `price` in the 201: null, as Twilio nearly always answers a creation
   * (the price is filled in once the message is sent), or a charge such as "-0.00750".
   */
  price: string | null = null;
  readonly accountSid: string;
  readonly authToken: string;
  readonly #server: Server;
  readonly #publicBaseUrl: string;
  readonly #messagesPath: string;
  #app: InProcessApp | undefined;
  #mode: FakeTwilioMode = "ok";
  #port = 0;
  /** Requests left unanswered (`hang`), ended when the fake recovers or closes. */
  readonly #hung = new Set<ServerResponse>();

  private constructor(
    server: Server,
    publicBaseUrl: string,
    account: { accountSid: string; authToken: string },
  ) {
    this.#server = server;
    this.#publicBaseUrl = publicBaseUrl.replace(/\/+$/, "");
    this.accountSid = account.accountSid;
    this.authToken = account.authToken;
    this.#messagesPath = `/2010-04-01/Accounts/${account.accountSid}/Messages.json`;
  }

  /**
   * `publicBaseUrl`: the service's PUBLIC_BASE_URL, under which every StatusCallback must be.
   * `account`: the Twilio account it plays (a second fake plays another, with its own token).
   */
  static async start(
    publicBaseUrl: string,
    account: { accountSid: string; authToken: string } = {
      accountSid: TWILIO_ACCOUNT_SID,
      authToken: TWILIO_AUTH_TOKEN,
    },
    port = 0,
  ): Promise<FakeTwilio> {
    let fake: FakeTwilio | undefined;
    const server = createServer((req, res) => void fake?.handle(req, res));
    fake = new FakeTwilio(server, publicBaseUrl, account);
    await new Promise<void>((resolve) => server.listen(port, "127.0.0.1", resolve));
    fake.#port = (server.address() as AddressInfo).port;
    return fake;
  }

  get baseUrl(): string {
    return `http://127.0.0.1:${this.#port}`;
  }
  /**
   * The configuration of a named account of a provider list (`TWILIO_<NAME>_ACCOUNT_SID`,
   * `_AUTH_TOKEN`, `_BASE_URL`: docs/decisions/0046) that sends to this fake.
   */
  accountEnv(name: string): Record<string, string> {
    const prefix = `TWILIO_${name.toUpperCase()}_`;
    return {
      [`${prefix}ACCOUNT_SID`]: this.accountSid,
      [`${prefix}AUTH_TOKEN`]: this.authToken,
      [`${prefix}BASE_URL`]: this.baseUrl,
    };
  }

  get mode(): FakeTwilioMode {
    return this.#mode;
  }

  /**
   * Switches how it answers from now on. `refuse` closes the listener and every open connection
   * (a request on one in flight is cut); leaving it listens on the same port again. Leaving `hang`
   * ends the requests left hanging by closing their connections.
   */
  async behave(mode: FakeTwilioMode): Promise<void> {
    if (mode === this.#mode) return;
    const from = this.#mode;
    this.#mode = mode;
    if (from === "hang") this.#endHung();
    if (mode === "refuse") {
      await new Promise<void>((resolve) => {
        this.#server.close(() => resolve());
        this.#server.closeAllConnections();
      });
    } else if (from === "refuse") {
      await new Promise<void>((resolve) => this.#server.listen(this.#port, "127.0.0.1", resolve));
    }
  }

  /** The requests made for one of our messages (by its StatusCallback). */
  receivedFor(messageId: string): ReceivedSms[] {
    return this.received.filter((request) => request.messageId === messageId);
  }

  #endHung(): void {
    for (const res of this.#hung) res.socket?.destroy();
    this.#hung.clear();
  }

  /** Posts the callbacks to this app in process, at the path under PUBLIC_BASE_URL. */
  attach(app: InProcessApp): void {
    this.#app = app;
  }

  async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const fields = Object.fromEntries(new URLSearchParams(Buffer.concat(chunks).toString("utf8")));
    if (req.method !== "POST" || req.url !== this.#messagesPath) {
      res.writeHead(404, { "Content-Type": "application/json" });
      res.end(JSON.stringify({ code: 20404, message: "not found" }));
      return;
    }
    const callback = fields.StatusCallback;
    const messageId = callback?.slice(callback.lastIndexOf("/") + 1) || undefined;
    const received = { messageId, fields, receivedAt: Date.now() };
    const record = (request: ReceivedSms) => {
      this.received.push(request);
      this.onReceived?.(request);
    };
    if (this.#mode === "hang") {
      record({ ...received, answer: "hung", made: false });
      this.#hung.add(res);
      res.on("close", () => this.#hung.delete(res));
      return;
    }
    if (this.#mode === "made_then_unavailable") {
      record({ ...received, answer: 503, made: true });
      this.sent.push({ sid: `SM${randomUUID().replaceAll("-", "")}`, fields });
      this.#unavailable(res);
      return;
    }
    if (this.#mode !== "ok") {
      // `refuse` while a connection opened before it was still being read: refused all the same.
      record({ ...received, answer: 503, made: false });
      this.#unavailable(res);
      return;
    }
    record({ ...received, answer: 201, made: true });
    const sms = { sid: `SM${randomUUID().replaceAll("-", "")}`, fields };
    this.sent.push(sms);
    await this.beforeAnswer?.(sms);
    res.writeHead(201, { "Content-Type": "application/json" });
    res.end(JSON.stringify(this.messageResource(sms)), () => this.afterAnswer?.(sms));
  }

  #unavailable(res: ServerResponse): void {
    res.writeHead(503, { "Content-Type": "application/json" });
    res.end(JSON.stringify({ code: 20503, message: "Service Unavailable", status: 503 }));
  }

  /** The Message resource Twilio answers a creation with (its fields as strings, as Twilio's are). */
  messageResource(sms: SentSms) {
    const body = sms.fields.Body ?? "";
    const now = new Date().toUTCString().replace("GMT", "+0000");
    return {
      account_sid: this.accountSid,
      api_version: "2010-04-01",
      body,
      date_created: now,
      date_sent: null,
      date_updated: now,
      direction: "outbound-api",
      error_code: null,
      error_message: null,
      from: sms.fields.From ?? null,
      messaging_service_sid: null,
      num_media: "0",
      // Twilio's own count, by its own calculator.
      num_segments: String(new SegmentedMessage(body).segmentsCount),
      price: this.price,
      price_unit: "USD",
      sid: sms.sid,
      status: "queued",
      to: sms.fields.To ?? null,
      uri: `/2010-04-01/Accounts/${this.accountSid}/Messages/${sms.sid}.json`,
    };
  }

  /** The SMS Twilio was asked to send to `to` (the first). */
  sentTo(to: string): SentSms | undefined {
    return this.sent.find((sms) => sms.fields.To === to);
  }

  /**
   * Posts a status callback for `sms` as Twilio does: to its StatusCallback, form-encoded, signed
   * by the `twilio` package over that URL and the fields (or over `signedUrl`, with `token`).
   * In process, the request's Host and X-Forwarded-* name another host: the check must not use them.
   */
  async callback(
    sms: SentSms,
    status: string,
    options: {
      extra?: Record<string, string>;
      token?: string;
      signedUrl?: string;
      signature?: string | null;
      tamper?: Record<string, string>;
      url?: string;
    } = {},
  ): Promise<Response> {
    const url = options.url ?? sms.fields.StatusCallback;
    if (!url?.startsWith(this.#publicBaseUrl))
      throw new Error(`no StatusCallback under ${this.#publicBaseUrl}: ${url}`);
    const fields: Record<string, string> = {
      ApiVersion: "2010-04-01",
      AccountSid: this.accountSid,
      From: sms.fields.From ?? "",
      To: sms.fields.To ?? "",
      MessageSid: sms.sid,
      SmsSid: sms.sid,
      MessageStatus: status,
      SmsStatus: status,
      ...options.extra,
    };
    const signature =
      options.signature === undefined
        ? twilio.getExpectedTwilioSignature(options.token ?? this.authToken, options.signedUrl ?? url, fields)
        : options.signature;
    const init = {
      method: "POST",
      headers: {
        "content-type": "application/x-www-form-urlencoded; charset=utf-8",
        ...(this.#app ? { host: "internal.example" } : {}),
        "x-forwarded-host": "attacker.example",
        "x-forwarded-proto": "http",
        ...(signature === null ? {} : { "x-twilio-signature": signature }),
      },
      body: new URLSearchParams({ ...fields, ...options.tamper }).toString(),
    };
    if (this.#app) return this.#app.request(url.slice(this.#publicBaseUrl.length), init);
    return fetch(url, init);
  }

  async close(): Promise<void> {
    this.#endHung();
    this.#server.closeAllConnections();
    if (this.#mode === "refuse") return;
    await new Promise<void>((resolve) => this.#server.close(() => resolve()));
  }
}
