import type { Address, NodemailerError, SendMailOptions, SMTPSentMessageInfo, Transporter } from "nodemailer";
import nodemailer from "nodemailer";
import type { AccountRefusal, DeliveryError, DeliveryOutcome } from "../../../domain/delivery-outcome.js";
import { failedOutcome, redactRecipients, type Untaken } from "../../providers/redact.js";
import { type ReturnPathSettings, returnPath } from "../bounces/verp.js";
import type { EmailAddress, EmailMessage, EmailProvider } from "./provider.js";

export interface SmtpEmailProviderOptions {
  host: string;
  port: number;
  /** TLS from the first byte (SMTPS, usually port 465). */
  secure: boolean;
  /** Refuse to send unless the server upgrades the connection with STARTTLS (usually port 587). */
  requireTls: boolean;
  user?: string;
  password?: string;
  /** Applies to each wait on its own: connecting, the server's greeting, and any silence mid-session. */
  timeoutMs: number;
  /**
   * Default true. False accepts any certificate: the connection is still encrypted, but a
   * man in the middle goes unnoticed, so the config only chooses it when no credentials are sent
   * and TLS is not required (opportunistic STARTTLS).
   */
  rejectUnauthorized?: boolean;
  /** Keep connections open and reuse them across messages. */
  pool: boolean;
  /** With `pool`: most connections open at once (nodemailer's default is 5). */
  maxConnections?: number;
  /**
   * With `BOUNCE_DOMAIN`: each message's envelope sender is its own return path,
   * `bounce+{message_id}@BOUNCE_DOMAIN` (VERP, docs/decisions/0040), where its DSNs and complaints
   * come back; the From header stays the sender's. Without: the envelope sender is the From address.
   */
  returnPath?: ReturnPathSettings;
  /** The account's name in outcomes and the history: `smtp` (default), or a list's `smtp:relay2`. */
  name?: string;
}

/**
 * Sends over SMTP with nodemailer; one transport (pooled or not) per provider. Every answer is
 * mapped onto a {@link DeliveryOutcome}, by nodemailer's structured fields and never by text:
 * - any SMTP reply code 5xx is `permanent` (503 and 535 included), 4xx and anything else
 *   `transient`; the code is "smtp_<reply code>"; a 5xx that refuses our account (credentials,
 *   relaying denied) rather than the recipient is marked as such, for a provider list;
 * - with no reply: a connection that fails, drops or stays silent past `timeoutMs` is
 *   `transient` ("network_error", "timeout"), as are TLS and local credential problems and any
 *   error not recognised; an envelope or message nodemailer refuses to send is `permanent`.
 *
 * A message is a success once the server accepts it for at least one recipient: recipients it
 * refused are dropped silently, as a mail server does with addresses it cannot deliver to after
 * accepting a message.
 *
 * The error's message is ours and names neither the server (host and port) nor anything it said:
 * servers quote the recipient's address in their replies ("550 5.1.1 <ada@…>: Recipient address
 * rejected"), and tenants read the message in the history. The reply goes to the worker's log,
 * every recipient in it replaced by "[recipient]".
 */
export class SmtpEmailProvider implements EmailProvider {
  readonly name: string;
  readonly #transport: Transporter<SMTPSentMessageInfo>;
  readonly #server: string;
  readonly timeoutMs: number;
  /** Strings never allowed into an error message: the password and the AUTH lines that carry it. */
  readonly #secrets: string[];
  readonly #returnPath: ReturnPathSettings | undefined;

  constructor(options: SmtpEmailProviderOptions) {
    this.name = options.name ?? "smtp";
    this.#server = `${options.host}:${options.port}`;
    this.timeoutMs = options.timeoutMs;
    this.#secrets = secretsOf(options.user, options.password);
    this.#returnPath = options.returnPath;
    this.#transport = nodemailer.createTransport({
      host: options.host,
      port: options.port,
      secure: options.secure,
      requireTLS: options.requireTls,
      tls: { rejectUnauthorized: options.rejectUnauthorized ?? true },
      auth: options.user !== undefined ? { user: options.user, pass: options.password ?? "" } : undefined,
      connectionTimeout: options.timeoutMs,
      greetingTimeout: options.timeoutMs,
      socketTimeout: options.timeoutMs,
      dnsTimeout: options.timeoutMs,
      pool: options.pool,
      ...(options.maxConnections !== undefined && { maxConnections: options.maxConnections }),
      // One requeue covers a pooled connection the server closed just as it was picked up; more
      // would multiply the time an attempt takes, and retrying is the worker's job.
      maxRequeues: 1,
      // Content is always given as strings; never let a value be read as a file path or URL.
      disableFileAccess: true,
      disableUrlAccess: true,
    });
    // Every failure reaches us through sendMail; without a listener an 'error' event the
    // transport emits on its own would crash the worker.
    this.#transport.on("error", () => {});
  }

  async send(message: EmailMessage): Promise<DeliveryOutcome> {
    try {
      const info = await this.#transport.sendMail(mailOptions(message, this.#returnPath));
      return { ok: true, provider: this.name, providerMessageId: providerMessageIdOf(info) };
    } catch (err) {
      const { error, detail } = classify(err, this.timeoutMs);
      const recipients = [...message.to, ...message.cc, ...message.bcc].map((r) => r.email);
      return this.#failure(error, `SMTP server ${this.#server}: ${redactRecipients(detail, recipients)}`, {
        notTaken: neverTaken(err),
        accountRefusal: accountRefusalOf(err),
      });
    }
  }

  /** Closes pooled connections once their message in flight, if any, is done. */
  async close(): Promise<void> {
    this.#transport.close();
  }

  /** A failure, its message and its detail (for the log) cleaned of the password. */
  #failure(error: DeliveryError, detail: string, untaken: Untaken): DeliveryOutcome {
    return failedOutcome(this.name, error, this.#secrets, detail, untaken);
  }
}

/**
 * The Message-ID is the same on every attempt of a message, so a receiver that already has it
 * can drop the duplicate a retry causes when a server accepted a message but its reply was lost.
 * bcc goes only into the envelope: nodemailer never writes a Bcc header. With a return path
 * the envelope is given whole (nodemailer then takes its recipients from it, not the headers).
 */
function mailOptions(message: EmailMessage, verp: ReturnPathSettings | undefined): SendMailOptions {
  return {
    ...(verp && {
      envelope: {
        from: returnPath(verp, message.messageId),
        to: message.to.map((r) => r.email),
        cc: message.cc.map((r) => r.email),
        bcc: message.bcc.map((r) => r.email),
      },
    }),
    from: address(message.from),
    to: message.to.map(address),
    cc: message.cc.map(address),
    bcc: message.bcc.map(address),
    subject: message.subject,
    html: message.html,
    text: message.text,
    messageId: `<${message.messageId}@${domainOf(message.from.email)}>`,
    headers: { "X-Notification-Id": message.messageId },
  };
}

function address(a: EmailAddress): Address {
  return a.name ? { name: a.name, address: a.email } : { address: a.email };
}

function domainOf(email: string): string {
  const at = email.lastIndexOf("@");
  const domain =
    at >= 0
      ? email
          .slice(at + 1)
          .trim()
          .toLowerCase()
      : "";
  return domain || "localhost";
}

/**
 * Postfix and SendGrid answer "250 2.0.0 Ok: queued as 4XyZ…", Exim "250 OK id=1tq0Xx-…";
 * that queue id is what the server's logs and bounces refer to.
 */
const QUEUE_ID = /\b(?:queued as|id=)\s*([A-Za-z0-9][A-Za-z0-9._-]*)/i;

function providerMessageIdOf(info: SMTPSentMessageInfo): string {
  return QUEUE_ID.exec(info.response ?? "")?.[1] ?? info.serverMessageId ?? info.messageId;
}

/** Codes of a connection that failed, dropped or could not be opened. */
const NETWORK_CODES = new Set(["ECONNECTION", "ESOCKET", "EDNS", "EPROXY"]);

const TIMEOUT_WAITS: Record<string, string> = {
  CONNECT_TIMEOUT: "to connect",
  GREETING_TIMEOUT: "for the greeting",
  UPGRADE_TIMEOUT: "for the TLS upgrade",
  SOCKET_TIMEOUT: "for a reply",
};

/** The SMTP commands a reply can answer, as nodemailer names them; only these are named in a message. */
const COMMAND = /^(?:CONN|EHLO|HELO|STARTTLS|AUTH(?: [A-Z0-9-]+)?|MAIL FROM|RCPT TO|DATA|RSET|QUIT|API)$/;

function classify(err: unknown, timeoutMs: number): { error: DeliveryError; detail: string } {
  if (!(err instanceof Error)) {
    return {
      error: { class: "transient", code: "smtp_error", message: "The SMTP send failed" },
      detail: String(err),
    };
  }
  const e: NodemailerError = err;
  const code = typeof e.code === "string" ? e.code : undefined;
  const detail = [code, e.originalCode, e.command, e.response?.trim() || e.message.trim()]
    .filter(Boolean)
    .join(": ");
  if (typeof e.responseCode === "number") {
    // RFC 5321 §4.2.1: 5yz is a permanent negative reply; 4yz (and an unexpected 2yz or 3yz)
    // says the same message may go through later.
    const permanent = e.responseCode >= 500 && e.responseCode <= 599;
    const command = e.command && COMMAND.test(e.command) ? e.command : "the session";
    return {
      error: {
        class: permanent ? "permanent" : "transient",
        code: `smtp_${e.responseCode}`,
        message: `The SMTP server answered ${command} with ${e.responseCode}`,
      },
      detail,
    };
  }

  if (code === "ETIMEDOUT") {
    const wait = (e.timeoutType && TIMEOUT_WAITS[e.timeoutType]) ?? "";
    return {
      error: {
        class: "transient",
        code: "timeout",
        message: `The SMTP server did not answer within ${timeoutMs} ms${wait ? ` (waiting ${wait})` : ""}`,
      },
      detail,
    };
  }
  if (code !== undefined && NETWORK_CODES.has(code)) {
    return {
      error: { class: "transient", code: "network_error", message: "Could not reach the SMTP server" },
      detail,
    };
  }
  if (code === "ETLS" || code === "EREQUIRETLS") {
    return {
      error: { class: "transient", code: "tls_error", message: "TLS with the SMTP server failed" },
      detail,
    };
  }
  // Refused by nodemailer before the server saw it (no recipients, an unusable address, an
  // oversized message): the same message fails the same way every time.
  if (code === "EENVELOPE" || code === "EMESSAGE") {
    return {
      error: { class: "permanent", code: "invalid_message", message: "The message cannot be sent over SMTP" },
      detail,
    };
  }
  // Missing credentials and anything unrecognised: a configuration fix or a new connection may
  // well cure it, so it is retried rather than failed for good.
  return { error: { class: "transient", code: "smtp_error", message: "The SMTP send failed" }, detail };
}

/** System errors of a connection that was never made. */
const NO_CONNECTION_CODES = new Set([
  "ECONNREFUSED",
  "ENOTFOUND",
  "EAI_AGAIN",
  "EHOSTUNREACH",
  "ENETUNREACH",
]);
/** Waits that end before any mail transaction starts. */
const SETUP_TIMEOUTS = new Set(["CONNECT_TIMEOUT", "GREETING_TIMEOUT", "UPGRADE_TIMEOUT"]);

/**
 * Whether the server provably did not take the message (docs/decisions/0046), so another server
 * may be tried for the same attempt: it answered a 4xx (a refusal, whatever the command: even
 * after the message's data, 4xx means not accepted), or the session failed before any mail
 * transaction (no connection, no such host, no greeting, a failed TLS upgrade). A time-out or a
 * dropped connection once the session is under way may come after the server accepted the data.
 */
function neverTaken(err: unknown): boolean {
  if (!(err instanceof Error)) return false;
  const e: NodemailerError = err;
  if (typeof e.responseCode === "number") return e.responseCode >= 400 && e.responseCode <= 499;
  if (e.code === "EDNS" || e.code === "ETLS" || e.code === "EREQUIRETLS") return true;
  if (e.code === "ETIMEDOUT") return e.timeoutType !== undefined && SETUP_TIMEOUTS.has(e.timeoutType);
  return typeof e.originalCode === "string" && NO_CONNECTION_CODES.has(e.originalCode);
}

/**
 * Whether the server refused our account rather than the message's recipient or content
 * (docs/decisions/0046), by reply code, command and RFC 3463 enhanced status, never by text:
 * - `account`: a 5xx answer to AUTH (535 credentials invalid, 534, 538 …) or a 530 (authentication
 *   required) to any command: every message would be refused alike;
 * - `sender`: a 5xx whose enhanced status is 5.7.1 (delivery not authorized) to MAIL FROM or to
 *   every RCPT TO: relaying, or this sender, is denied on this server. The enhanced status does not
 *   tell a relay denied to our account from a policy refusing this sender, so it is a refusal of
 *   this message, which the breaker does not count. After DATA, 5.7.1 refuses the content (as
 *   spam, say): permanent, never moved.
 * Each comes before the message's data is accepted: nothing was taken.
 */
function accountRefusalOf(err: unknown): AccountRefusal | undefined {
  if (!(err instanceof Error)) return undefined;
  const e: NodemailerError & { rejectedErrors?: NodemailerError[] } = err;
  const code = e.responseCode;
  if (typeof code !== "number" || code < 500 || code > 599) return undefined;
  if (code === 530 || /^AUTH\b/.test(e.command ?? "")) return "account";
  if (e.command !== "MAIL FROM" && e.command !== "RCPT TO") return undefined;
  // Every recipient refused: each refusal must be one of relaying, or one recipient's own refusal
  // (a 5.1.1 unknown user) would have the next server tried for the others' sake.
  const replies = e.rejectedErrors?.length ? e.rejectedErrors.map((r) => r.response) : [e.response];
  return replies.every((reply) => enhancedStatus(reply) === "5.7.1") ? "sender" : undefined;
}

/** The RFC 3463 enhanced status code a reply starts with ("554 5.7.1 …" → "5.7.1"), if any. */
function enhancedStatus(reply: string | undefined): string | undefined {
  return /^\d{3}[ -]([245]\.\d{1,3}\.\d{1,3})(?:\s|$)/.exec(reply?.trim() ?? "")?.[1];
}

/** The password, and how AUTH PLAIN and AUTH LOGIN put it on the wire. */
function secretsOf(user: string | undefined, password: string | undefined): string[] {
  if (!password) return [];
  const base64 = (text: string) => Buffer.from(text, "utf8").toString("base64");
  return [password, base64(password), base64(`\u0000${user ?? ""}\u0000${password}`)];
}
