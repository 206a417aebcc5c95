import type {
  AccountRefusal,
  DeliveryError,
  DeliveryOutcome,
  Price,
} from "../../../domain/delivery-outcome.js";
import { classifyFetchError, httpStatusError, refusedUntaken } from "../../providers/http.js";
import { failedOutcome, redactRecipients, type Untaken } from "../../providers/redact.js";
import { twilioStatusCallbackUrl } from "../receipts/twilio.js";
import type { SmsMessage, SmsProvider } from "./provider.js";

export interface TwilioSmsProviderOptions {
  accountSid: string;
  authToken: string;
  /** e.g. "https://api.twilio.com"; a trailing slash is tolerated. */
  baseUrl: string;
  /** Covers the whole exchange, response body included. */
  timeoutMs: number;
  /** Injected for tests; defaults to the global `fetch`. */
  fetch?: typeof fetch;
  /**
   * `PUBLIC_BASE_URL`: each message asks Twilio for status callbacks there
   * (src/channels/sms/receipts/twilio.ts). Unset: none are asked for, and no receipts come.
   */
  publicBaseUrl?: string;
  /** The account's name in outcomes and the history: `twilio` (default), or a list's `twilio:backup`. */
  name?: string;
}

/**
 * Twilio error codes that mean this recipient can never be reached: 21211 invalid "To" number,
 * 21614 not a mobile number, 21610 recipient replied STOP.
 */
const REJECTED_CODES = new Set([21211, 21614, 21610]);

/**
 * Twilio error codes that refuse this message on this account, not its recipient everywhere
 * (docs/decisions/0046): 21606 the From is not a message-capable number of this account, 21408 the
 * account may not send to the To number's region. Another account may well take it.
 */
const REFUSED_ON_THIS_ACCOUNT_CODES = new Set([21606, 21408]);
/**
 * Sends through Twilio's Messages REST API. Every answer is mapped onto a
 * {@link DeliveryOutcome}; see DESIGN.md §6 for the classification.
 */
export class TwilioSmsProvider implements SmsProvider {
  readonly name: string;
  readonly #url: string;
  readonly #authorization: string;
  /** Strings never allowed into an error message: the token and the header that carries it. */
  readonly #secrets: string[];
  readonly timeoutMs: number;
  readonly #fetch: typeof fetch;
  readonly #publicBaseUrl: string | undefined;

  constructor(options: TwilioSmsProviderOptions) {
    this.name = options.name ?? "twilio";
    const base = options.baseUrl.replace(/\/+$/, "");
    this.#url = `${base}/2010-04-01/Accounts/${encodeURIComponent(options.accountSid)}/Messages.json`;
    const credentials = Buffer.from(`${options.accountSid}:${options.authToken}`).toString("base64");
    this.#authorization = `Basic ${credentials}`;
    this.#secrets = options.authToken ? [options.authToken, credentials] : [];
    this.timeoutMs = options.timeoutMs;
    this.#fetch = options.fetch ?? ((input, init) => fetch(input, init));
    this.#publicBaseUrl = options.publicBaseUrl;
  }

  async send(message: SmsMessage): Promise<DeliveryOutcome> {
    try {
      return await this.#send(message);
    } catch (err) {
      const { error, detail, notTaken } = classifyFetchError(err, "Twilio", this.timeoutMs);
      return this.#failure(error, detail, { notTaken: Boolean(notTaken) });
    }
  }

  async #send(message: SmsMessage): Promise<DeliveryOutcome> {
    const response = await this.#fetch(this.#url, {
      method: "POST",
      headers: {
        Authorization: this.#authorization,
        "Content-Type": "application/x-www-form-urlencoded",
        Accept: "application/json",
      },
      body: this.#form(message),
      // A redirect would mean a misconfigured base URL; following it could resend the
      // credentials to another host, so it is reported instead.
      redirect: "manual",
      signal: AbortSignal.timeout(this.timeoutMs),
    });
    // Read inside the same time-out: a provider that sends headers then stalls is still stalled.
    const text = await response.text();

    if (response.ok) {
      // The sid is the id Twilio gives the message we asked it to make ("SM" and 32 hex digits),
      // not free text, so the success event records it; so are the price and the segment count,
      // once checked to be only a number, a currency code and a count.
      const created = createdMessage(text);
      if (created) return { ok: true, provider: this.name, ...created };
      // Twilio said yes but we cannot tell which message it made; retrying risks a duplicate,
      // dropping risks a loss, and a duplicate is the lesser harm.
      return this.#failure(
        {
          class: "transient",
          code: "bad_response",
          message: `Twilio answered HTTP ${response.status} without a message sid`,
        },
        `Twilio answered HTTP ${response.status}: ${redactRecipients(text, [message.to])}`,
      );
    }
    // Twilio's message quotes the request (the "To" number among others): the event has Twilio's
    // error code, the log its text without the number.
    // A 429 says Twilio made no message: another account may be tried for this attempt. A 503
    // does not (an edge may answer it after Twilio made the message): the attempt ends there.
    // Neither does a refusal of the account rather than the recipient, permanent as it is.
    return this.#failure(
      classifyErrorResponse(response, text),
      `Twilio answered HTTP ${response.status}: ${redactRecipients(text, [message.to])}`,
      { notTaken: refusedUntaken(response.status), accountRefusal: accountRefusalOf(response, text) },
    );
  }

  #form(message: SmsMessage): URLSearchParams {
    const form = new URLSearchParams({ To: message.to, From: message.from, Body: message.body });
    if (this.#publicBaseUrl)
      form.set("StatusCallback", twilioStatusCallbackUrl(this.#publicBaseUrl, message.messageId));
    return form;
  }

  /** A failure, its message and its detail (for the log) cleaned of the token. */
  #failure(error: DeliveryError, detail?: string, untaken?: Untaken): DeliveryOutcome {
    return failedOutcome(this.name, error, this.#secrets, detail, untaken);
  }
}

interface TwilioErrorBody {
  code?: number;
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

/** What a 2xx's Message resource says that the success event records. */
interface CreatedMessage {
  providerMessageId: string;
  price?: Price;
  segments?: number;
}

/**
 * The sid of the Message resource Twilio answered with, and what it charges and how many segments
 * it counted when it says: `price` is null at creation as a rule (Twilio fills it in once the
 * message is sent), a string such as "-0.00750" when known, `price_unit` a currency code, and
 * `num_segments` a count as a string ("0" through a Messaging Service, before a sender is chosen).
 */
function createdMessage(text: string): CreatedMessage | undefined {
  const body = parseJson(text);
  if (typeof body !== "object" || body === null || !("sid" in body)) return undefined;
  // Only a plain id: anything else in its place is not an id to record.
  if (typeof body.sid !== "string" || !/^[A-Za-z0-9]{1,64}$/.test(body.sid)) return undefined;
  const created: CreatedMessage = { providerMessageId: body.sid };
  const fields = body as { price?: unknown; price_unit?: unknown; num_segments?: unknown };
  if (
    typeof fields.price === "string" &&
    /^-?\d{1,9}(\.\d{1,10})?$/.test(fields.price) &&
    typeof fields.price_unit === "string" &&
    /^[A-Z]{3}$/.test(fields.price_unit)
  )
    created.price = { amount: fields.price, currency: fields.price_unit };
  if (typeof fields.num_segments === "string" && /^[1-9]\d{0,3}$/.test(fields.num_segments))
    created.segments = Number(fields.num_segments);
  return created;
}

function twilioError(text: string): TwilioErrorBody {
  const body = parseJson(text);
  if (typeof body !== "object" || body === null) return {};
  const result: TwilioErrorBody = {};
  if ("code" in body && typeof body.code === "number" && Number.isSafeInteger(body.code))
    result.code = body.code;
  return result;
}

/**
 * Whether Twilio refused the account rather than the message's recipient: a 401 or a 403 (20003
 * authentication failed, 20005 account not active) refuses the account itself; the codes of
 * {@link REFUSED_ON_THIS_ACCOUNT_CODES} refuse this message on this account.
 */
function accountRefusalOf(response: Response, text: string): AccountRefusal | undefined {
  if (response.status === 401 || response.status === 403) return "account";
  const { code } = twilioError(text);
  return code !== undefined && REFUSED_ON_THIS_ACCOUNT_CODES.has(code) ? "sender" : undefined;
}

function classifyErrorResponse(response: Response, text: string): DeliveryError {
  const status = response.status;
  const twilio = twilioError(text);
  const code = twilio.code !== undefined ? String(twilio.code) : `http_${status}`;
  const message = `Twilio answered HTTP ${status}${twilio.code !== undefined ? ` with error ${twilio.code}` : ""}`;

  if (twilio.code !== undefined && REJECTED_CODES.has(twilio.code)) {
    return { class: "rejected", code, message };
  }
  return httpStatusError(response, code, message);
}
