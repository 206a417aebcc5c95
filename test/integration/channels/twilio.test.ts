import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { parseRetryAfter } from "../../../src/channels/providers/http.js";
import { createSmsProvider } from "../../../src/channels/sms/providers/index.js";
import type { SmsMessage, SmsProvider } from "../../../src/channels/sms/providers/provider.js";
import { TwilioSmsProvider } from "../../../src/channels/sms/providers/twilio.js";
import type { DeliveryOutcome } from "../../../src/domain/delivery-outcome.js";

const ACCOUNT_SID = "AC0123456789abcdef0123456789abcdef";
const AUTH_TOKEN = "tok_3f9c2a7be1d64c58a0f1e2d3c4b5a697";
const BASIC = `Basic ${Buffer.from(`${ACCOUNT_SID}:${AUTH_TOKEN}`).toString("base64")}`;
const MESSAGES_PATH = `/2010-04-01/Accounts/${ACCOUNT_SID}/Messages.json`;

interface ReceivedRequest {
  method: string | undefined;
  url: string | undefined;
  authorization: string | undefined;
  contentType: string | undefined;
  fields: Record<string, string>;
}

/** What the fake does once path, auth and fields have passed Twilio's own checks. */
type Scenario = (req: ReceivedRequest, res: ServerResponse) => void;

function sendJson(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}) {
  res.writeHead(status, { "Content-Type": "application/json", ...headers });
  res.end(JSON.stringify(body));
}

function sendTwilioError(
  res: ServerResponse,
  status: number,
  code: number,
  message: string,
  headers: Record<string, string> = {},
) {
  sendJson(
    res,
    status,
    { code, message, more_info: `https://www.twilio.com/docs/errors/${code}`, status },
    headers,
  );
}

const queued: Scenario = (_req, res) =>
  sendJson(res, 201, { sid: "SM1234567890abcdef1234567890abcdef", status: "queued" });

/** Twilio's Message resource as a 201 carries it (every count and amount a string), with `fields` over it. */
function messageResource(req: ReceivedRequest, fields: Record<string, unknown>) {
  return {
    account_sid: ACCOUNT_SID,
    api_version: "2010-04-01",
    body: req.fields.Body,
    direction: "outbound-api",
    error_code: null,
    error_message: null,
    from: req.fields.From,
    num_media: "0",
    sid: "SM1234567890abcdef1234567890abcdef",
    status: "queued",
    to: req.fields.To,
    ...fields,
  };
}

/** A stand-in for Twilio's Messages endpoint on 127.0.0.1, recording what it was sent. */
class FakeTwilio {
  readonly requests: ReceivedRequest[] = [];
  scenario: Scenario = queued;
  readonly #server: Server;
  readonly #unanswered = new Set<ServerResponse>();

  private constructor(server: Server) {
    this.#server = server;
  }

  static async start(): Promise<FakeTwilio> {
    let fake: FakeTwilio | undefined;
    const server = createServer((req, res) => fake?.handle(req, res));
    fake = new FakeTwilio(server);
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    return fake;
  }

  get baseUrl(): string {
    return `http://127.0.0.1:${(this.#server.address() as AddressInfo).port}`;
  }

  handle(req: IncomingMessage, res: ServerResponse): void {
    this.#unanswered.add(res);
    res.on("close", () => this.#unanswered.delete(res));
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    req.on("end", () => {
      const received: ReceivedRequest = {
        method: req.method,
        url: req.url,
        authorization: req.headers.authorization,
        contentType: req.headers["content-type"],
        fields: Object.fromEntries(new URLSearchParams(Buffer.concat(chunks).toString("utf8"))),
      };
      this.requests.push(received);
      if (received.method !== "POST" || received.url !== MESSAGES_PATH) {
        return sendTwilioError(res, 404, 20404, "The requested resource was not found");
      }
      if (received.authorization !== BASIC) {
        return sendTwilioError(res, 401, 20003, "Authenticate");
      }
      if (!received.contentType?.startsWith("application/x-www-form-urlencoded")) {
        return sendTwilioError(res, 400, 20001, "Unsupported content type");
      }
      if (!received.fields.To) return sendTwilioError(res, 400, 21604, "A 'To' phone number is required.");
      if (!received.fields.From)
        return sendTwilioError(res, 400, 21603, "A 'From' phone number is required.");
      if (!received.fields.Body) return sendTwilioError(res, 400, 21602, "Message body is required.");
      this.scenario(received, res);
    });
  }

  /**
   * Drops any connection a scenario left hanging, so the next test and process exit are clean.
   * Idle keep-alive connections stay: closing them races the client's reuse of them.
   */
  reset(): void {
    for (const res of this.#unanswered) res.socket?.destroy();
    this.#unanswered.clear();
    this.requests.length = 0;
    this.scenario = queued;
  }

  async close(): Promise<void> {
    this.#server.closeAllConnections();
    await new Promise<void>((resolve, reject) =>
      this.#server.close((err) => (err ? reject(err) : resolve())),
    );
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

const sms: SmsMessage = {
  messageId: "0b9d7a52-5d3c-4f7e-9a51-2f3e5f1c0d11",
  to: "+447700900123",
  from: "+15017122661",
  body: "Your code is 123456 & expires in 10 min",
  attempt: 1,
};

/**
 * A failed outcome: `message` is the one tenants read (ours, quoting nothing of Twilio's answer);
 * `detail` is what Twilio said, for the worker's log.
 */
function failure(
  cls: string,
  code: string,
  message: unknown = expect.any(String),
  {
    retryAfterMs,
    detail = expect.any(String),
    notTaken,
    accountRefusal,
  }: { retryAfterMs?: number; detail?: unknown; notTaken?: true; accountRefusal?: "account" | "sender" } = {},
) {
  return {
    ok: false,
    provider: "twilio",
    error: { class: cls, code, message, ...(retryAfterMs === undefined ? {} : { retryAfterMs }) },
    detail,
    // Twilio provably made no message: a provider list may try another account (decision 0046).
    ...(notTaken && { notTaken }),
    // The account refused it, not the recipient: another account may take it (decision 0046).
    ...(accountRefusal && { notTaken: true, accountRefusal }),
  };
}

describe("TwilioSmsProvider against a local fake of the Messages endpoint", () => {
  let twilio: FakeTwilio;

  beforeAll(async () => {
    twilio = await FakeTwilio.start();
  });
  afterEach(() => twilio.reset());
  afterAll(() => twilio.close());

  function provider(overrides: { authToken?: string; timeoutMs?: number; baseUrl?: string } = {}) {
    return new TwilioSmsProvider({
      accountSid: ACCOUNT_SID,
      authToken: overrides.authToken ?? AUTH_TOKEN,
      baseUrl: overrides.baseUrl ?? twilio.baseUrl,
      timeoutMs: overrides.timeoutMs ?? 5000,
    });
  }

  /** Sends, and checks the one thing every outcome must satisfy: the secret never leaks. */
  async function send(p: SmsProvider = provider(), message: SmsMessage = sms): Promise<DeliveryOutcome> {
    const outcome = await p.send(message);
    const serialised = JSON.stringify(outcome);
    expect(serialised).not.toContain(AUTH_TOKEN);
    expect(serialised).not.toContain(BASIC.slice("Basic ".length));
    return outcome;
  }

  it("is named twilio, or as its provider list's account", () => {
    expect(provider().name).toBe("twilio");
    const named = new TwilioSmsProvider({
      accountSid: ACCOUNT_SID,
      authToken: AUTH_TOKEN,
      baseUrl: twilio.baseUrl,
      timeoutMs: 5000,
      name: "twilio:backup",
    });
    expect(named.name).toBe("twilio:backup");
  });

  it("a 201 with a sid is a success carrying that sid", async () => {
    expect(await send()).toStrictEqual({
      ok: true,
      provider: "twilio",
      providerMessageId: "SM1234567890abcdef1234567890abcdef",
    });
  });

  it("a 201 whose Message resource has a price carries it, its currency and Twilio's segment count", async () => {
    twilio.scenario = (req, res) =>
      sendJson(res, 201, messageResource(req, { price: "-0.00750", price_unit: "USD", num_segments: "2" }));
    expect(await send()).toStrictEqual({
      ok: true,
      provider: "twilio",
      providerMessageId: "SM1234567890abcdef1234567890abcdef",
      price: { amount: "-0.00750", currency: "USD" },
      segments: 2,
    });
  });

  it("a 201 whose price is null, as Twilio answers a creation as a rule, carries no price", async () => {
    twilio.scenario = (req, res) =>
      sendJson(res, 201, messageResource(req, { price: null, price_unit: "USD", num_segments: "1" }));
    expect(await send()).toStrictEqual({
      ok: true,
      provider: "twilio",
      providerMessageId: "SM1234567890abcdef1234567890abcdef",
      segments: 1,
    });
  });

  it.each([
    ["a price that is not a decimal number", { price: "0.0075 USD", price_unit: "USD" }],
    ["a price in exponent form", { price: "1e9", price_unit: "USD" }],
    ["a price as a JSON number", { price: -0.0075, price_unit: "USD" }],
    ["a currency that is not an ISO 4217 code", { price: "-0.00750", price_unit: "<b>USD</b>" }],
    ["no currency", { price: "-0.00750", price_unit: null }],
    ["a count of 0 (a Messaging Service, before it picks a sender)", { num_segments: "0" }],
    ["a count that is not one", { num_segments: "two" }],
    ["a count as a JSON number", { num_segments: 2 }],
  ])("%s is left out: only what is checked to be a price or a count is recorded", async (_, fields) => {
    twilio.scenario = (req, res) =>
      sendJson(
        res,
        201,
        messageResource(req, { price: null, price_unit: null, num_segments: null, ...fields }),
      );
    expect(await send()).toStrictEqual({
      ok: true,
      provider: "twilio",
      providerMessageId: "SM1234567890abcdef1234567890abcdef",
    });
  });

  it("posts To, From and Body form-encoded to the account's Messages resource with Basic auth", async () => {
    await send();
    expect(twilio.requests).toStrictEqual([
      {
        method: "POST",
        url: MESSAGES_PATH,
        authorization: BASIC,
        contentType: expect.stringMatching(/^application\/x-www-form-urlencoded/),
        fields: { To: sms.to, From: sms.from, Body: sms.body },
      },
    ]);
  });

  it("with PUBLIC_BASE_URL, asks for status callbacks at it + /callbacks/twilio/sms/{our message id}", async () => {
    const withCallbacks = new TwilioSmsProvider({
      accountSid: ACCOUNT_SID,
      authToken: AUTH_TOKEN,
      baseUrl: twilio.baseUrl,
      timeoutMs: 5000,
      publicBaseUrl: "https://notify.example.com/prefix/",
    });
    await send(withCallbacks);
    expect(twilio.requests[0]?.fields).toStrictEqual({
      To: sms.to,
      From: sms.from,
      Body: sms.body,
      StatusCallback: `https://notify.example.com/prefix/callbacks/twilio/sms/${sms.messageId}`,
    });
  });

  it("a base URL with a trailing slash still reaches the right path", async () => {
    const outcome = await send(provider({ baseUrl: `${twilio.baseUrl}/` }));
    expect(outcome.ok).toBe(true);
    expect(twilio.requests[0]?.url).toBe(MESSAGES_PATH);
  });

  it("a 400 with code 21211 rejects the recipient", async () => {
    twilio.scenario = (req, res) =>
      sendTwilioError(res, 400, 21211, `The 'To' number ${req.fields.To} is not a valid phone number.`);
    const outcome = await send();
    // Twilio's text quotes the number; neither the message tenants read nor the log's detail does.
    expect(outcome).toStrictEqual(
      failure("rejected", "21211", "Twilio answered HTTP 400 with error 21211", {
        detail: expect.stringContaining("The 'To' number [recipient] is not a valid phone number."),
      }),
    );
    if (outcome.ok) throw new Error("unreachable");
    expect(JSON.stringify(outcome)).not.toContain(sms.to.slice(1));
  });

  it("a 400 with code 21614 (not a mobile number) rejects the recipient", async () => {
    twilio.scenario = (req, res) =>
      sendTwilioError(res, 400, 21614, `'To' number ${req.fields.To} is not a valid mobile number`);
    expect(await send()).toStrictEqual(
      failure("rejected", "21614", "Twilio answered HTTP 400 with error 21614", {
        detail: expect.stringContaining("not a valid mobile"),
      }),
    );
  });

  it("a 400 with code 21610 (recipient unsubscribed) rejects the recipient", async () => {
    twilio.scenario = (_req, res) =>
      sendTwilioError(res, 400, 21610, "Attempt to send to unsubscribed recipient");
    expect(await send()).toStrictEqual(
      failure("rejected", "21610", "Twilio answered HTTP 400 with error 21610", {
        detail: expect.stringContaining("Attempt to send to unsubscribed recipient"),
      }),
    );
  });

  it("a 400 with 21606 (the From is not this account's) is permanent, and an account's refusal of this message: another account may take it", async () => {
    twilio.scenario = (_req, res) =>
      sendTwilioError(
        res,
        400,
        21606,
        "The 'From' phone number provided is not a valid message-capable number.",
      );
    expect(await send()).toStrictEqual(
      failure("permanent", "21606", "Twilio answered HTTP 400 with error 21606", {
        detail: expect.stringContaining(
          "The 'From' phone number provided is not a valid message-capable number.",
        ),
        accountRefusal: "sender",
      }),
    );
  });

  it("a 400 with any other code, such as 21617 (a body too long), is permanent and never another account's to try", async () => {
    twilio.scenario = (_req, res) =>
      sendTwilioError(res, 400, 21617, "The concatenated message body exceeds the 1600 character limit.");
    expect(await send()).toStrictEqual(
      failure("permanent", "21617", "Twilio answered HTTP 400 with error 21617"),
    );
  });

  it("a wrong auth token gets a 401, which is permanent, refuses the account itself, and does not echo the token", async () => {
    const wrongToken = "tok_wrong_0000000000000000000000000";
    const outcome = await send(provider({ authToken: wrongToken }));
    expect(outcome).toStrictEqual(
      failure("permanent", "20003", "Twilio answered HTTP 401 with error 20003", {
        detail: expect.stringContaining("Authenticate"),
        accountRefusal: "account",
      }),
    );
    expect(JSON.stringify(outcome)).not.toContain(wrongToken);
    expect(twilio.requests[0]?.authorization).toBe(
      `Basic ${Buffer.from(`${ACCOUNT_SID}:${wrongToken}`).toString("base64")}`,
    );
  });

  it("a 403 with 20005 (account not active) is permanent and refuses the account itself", async () => {
    twilio.scenario = (_req, res) => sendTwilioError(res, 403, 20005, "Account not active");
    expect(await send()).toStrictEqual(
      failure("permanent", "20005", "Twilio answered HTTP 403 with error 20005", {
        accountRefusal: "account",
      }),
    );
  });

  it("an error message that echoes the auth token is redacted", async () => {
    twilio.scenario = (req, res) =>
      sendTwilioError(res, 400, 20001, `Bad credentials: ${req.authorization} ${AUTH_TOKEN}`);
    const outcome = await send();
    expect(outcome).toMatchObject({
      detail: expect.stringContaining("Bad credentials: Basic [redacted] [redacted]"),
    });
  });

  it("a 429 with Retry-After: 3 is transient, not taken, and asks for a 3000 ms wait", async () => {
    twilio.scenario = (_req, res) =>
      sendTwilioError(res, 429, 20429, "Too Many Requests", { "Retry-After": "3" });
    expect(await send()).toStrictEqual(
      failure("transient", "20429", "Twilio answered HTTP 429 with error 20429", {
        retryAfterMs: 3000,
        notTaken: true,
      }),
    );
  });

  it("a 429 with Retry-After as an HTTP date waits until that date", async () => {
    const retryAt = new Date(Date.now() + 10_000).toUTCString();
    twilio.scenario = (_req, res) =>
      sendTwilioError(res, 429, 20429, "Too Many Requests", { "Retry-After": retryAt });
    const outcome = await send();
    if (outcome.ok) throw new Error("expected a failure");
    expect(outcome.error.class).toBe("transient");
    // The header has one-second precision, so the wait is a little under ten seconds.
    expect(outcome.error.retryAfterMs).toBeGreaterThan(8000);
    expect(outcome.error.retryAfterMs).toBeLessThanOrEqual(10_000);
  });

  it("a 429 without Retry-After is transient with no suggested wait", async () => {
    twilio.scenario = (_req, res) => sendTwilioError(res, 429, 20429, "Too Many Requests");
    expect(await send()).toStrictEqual(
      failure("transient", "20429", "Twilio answered HTTP 429 with error 20429", { notTaken: true }),
    );
  });

  it("a 500 is transient, and may have been taken (a gateway may answer it after Twilio did)", async () => {
    twilio.scenario = (_req, res) => sendTwilioError(res, 500, 20500, "Internal Server Error");
    expect(await send()).toStrictEqual(
      failure("transient", "20500", "Twilio answered HTTP 500 with error 20500", {
        detail: expect.stringContaining("Internal Server Error"),
      }),
    );
  });

  it("a 503 with a plain-text body is transient, coded by its status, and may have been taken (an edge may answer it after Twilio made the message)", async () => {
    twilio.scenario = (_req, res) => {
      res.writeHead(503, { "Content-Type": "text/plain" });
      res.end("Service Unavailable");
    };
    expect(await send()).toStrictEqual(
      failure("transient", "http_503", "Twilio answered HTTP 503", {
        detail: "Twilio answered HTTP 503: Service Unavailable",
      }),
    );
  });

  it.each([502, 503, 504])("a %i is transient and may have been taken", async (status) => {
    twilio.scenario = (_req, res) => sendTwilioError(res, status, 20000 + status, "Gateway");
    const outcome = await send();
    expect(outcome).toMatchObject({ ok: false, error: { class: "transient" } });
    expect(outcome).not.toHaveProperty("notTaken");
  });

  it("a connection reset once the request is sent is transient and may have been taken", async () => {
    twilio.scenario = (_req, res) => res.socket?.resetAndDestroy();
    const outcome = await send();
    expect(outcome).toMatchObject({ ok: false, error: { class: "transient", code: "network_error" } });
    expect(outcome).not.toHaveProperty("notTaken");
  });

  it("a redirect is not followed and is permanent, since the base URL must be wrong", async () => {
    twilio.scenario = (_req, res) => {
      res.writeHead(302, { Location: "http://127.0.0.1:1/elsewhere" });
      res.end();
    };
    expect(await send()).toStrictEqual(failure("permanent", "http_302", "Twilio answered HTTP 302"));
    expect(twilio.requests).toHaveLength(1);
  });

  it("a request that gets no answer within the time-out is transient", async () => {
    twilio.scenario = () => {
      // Never answer; reset() closes the socket after the test.
    };
    const started = performance.now();
    const outcome = await send(provider({ timeoutMs: 200 }));
    expect(outcome).toStrictEqual(failure("transient", "timeout", "No answer from Twilio within 200 ms"));
    expect(performance.now() - started).toBeLessThan(3000);
    expect(twilio.requests).toHaveLength(1);
  });

  it("a response whose body stalls past the time-out is transient", async () => {
    twilio.scenario = (_req, res) => {
      res.writeHead(201, { "Content-Type": "application/json" });
      res.write('{"sid":');
    };
    expect(await send(provider({ timeoutMs: 200 }))).toStrictEqual(failure("transient", "timeout"));
  });

  it("a refused connection is a transient network error", async () => {
    const port = await closedPort();
    const outcome = await send(provider({ baseUrl: `http://127.0.0.1:${port}` }));
    expect(outcome).toStrictEqual(
      failure("transient", "network_error", "Could not reach Twilio", {
        detail: expect.stringMatching(new RegExp(`ECONNREFUSED.*127\\.0\\.0\\.1:${port}`)),
        notTaken: true,
      }),
    );
  });

  it("a 200 with a non-JSON body is transient, since Twilio may or may not have sent", async () => {
    twilio.scenario = (_req, res) => {
      res.writeHead(200, { "Content-Type": "text/html" });
      res.end("<html>OK</html>");
    };
    expect(await send()).toStrictEqual(
      failure("transient", "bad_response", "Twilio answered HTTP 200 without a message sid", {
        detail: "Twilio answered HTTP 200: <html>OK</html>",
      }),
    );
  });

  it("a 201 whose JSON has no string sid is transient", async () => {
    twilio.scenario = (_req, res) => sendJson(res, 201, { sid: 42, status: "queued" });
    expect(await send()).toStrictEqual(failure("transient", "bad_response"));
  });

  it("an injected fetch that throws still yields an outcome rather than an exception", async () => {
    const p = new TwilioSmsProvider({
      accountSid: ACCOUNT_SID,
      authToken: AUTH_TOKEN,
      baseUrl: twilio.baseUrl,
      timeoutMs: 1000,
      fetch: async () => {
        throw "not even an Error";
      },
    });
    expect(await send(p)).toStrictEqual(
      failure("transient", "network_error", "Could not reach Twilio", { detail: "not even an Error" }),
    );
  });

  it("createSmsProvider builds a Twilio provider from config", async () => {
    const p = createSmsProvider({
      SMS_PROVIDER: "twilio",
      TWILIO_ACCOUNT_SID: ACCOUNT_SID,
      TWILIO_AUTH_TOKEN: AUTH_TOKEN,
      TWILIO_BASE_URL: twilio.baseUrl,
      TWILIO_TIMEOUT_MS: 1000,
    });
    expect(p.name).toBe("twilio");
    expect(await send(p)).toMatchObject({ ok: true });
    expect(twilio.requests[0]?.authorization).toBe(BASIC);
  });

  it("createSmsProvider refuses Twilio without credentials", () => {
    expect(() =>
      createSmsProvider({
        SMS_PROVIDER: "twilio",
        TWILIO_ACCOUNT_SID: ACCOUNT_SID,
        TWILIO_AUTH_TOKEN: undefined,
        TWILIO_BASE_URL: "https://api.twilio.com",
        TWILIO_TIMEOUT_MS: 1000,
      }),
    ).toThrow(/TWILIO_AUTH_TOKEN/);
  });
});

describe("parseRetryAfter", () => {
  const now = Date.parse("2025-01-01T00:00:00Z");

  it("reads delay-seconds", () => {
    expect(parseRetryAfter("3", now)).toBe(3000);
    expect(parseRetryAfter(" 0 ", now)).toBe(0);
  });

  it("reads an HTTP date relative to now, never negative", () => {
    expect(parseRetryAfter("Wed, 01 Jan 2025 00:00:07 GMT", now)).toBe(7000);
    expect(parseRetryAfter("Tue, 31 Dec 2024 23:59:00 GMT", now)).toBe(0);
  });

  it("ignores a missing or unreadable header", () => {
    expect(parseRetryAfter(null, now)).toBeUndefined();
    expect(parseRetryAfter("soon", now)).toBeUndefined();
    expect(parseRetryAfter("-5", now)).toBeUndefined();
  });
});
