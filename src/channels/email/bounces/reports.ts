import PostalMime from "postal-mime";
import type { DeliveryDelay, Receipt } from "../../../domain/receipts.js";

/**
 * What a mail server sends back to a message's return path (docs/decisions/0040), parsed with
 * postal-mime and mapped onto a delivery receipt:
 * - an RFC 3464 delivery status notification (`multipart/report; report-type=delivery-status`):
 *   its `message/delivery-status` part has one block of per-message fields, then one block per
 *   recipient (`Final-Recipient`, `Action`, `Status`, `Diagnostic-Code`, …);
 * - an RFC 5965 abuse report (ARF, `multipart/report; report-type=feedback-report`): its
 *   `message/feedback-report` part says `Feedback-Type: abuse` (and `Original-Rcpt-To`).
 * Anything else (an out-of-office reply, a forged or broken report) is not a report.
 */

/** The provider of every e-mail receipt: the SMTP provider accepted the messages they are about. */
export const EMAIL_RECEIPT_PROVIDER = "smtp";

export interface DsnRecipient {
  /** `failed`, `delayed`, `delivered`, `relayed` or `expanded` (lower-cased). */
  action: string;
  /** The enhanced status code (`5.1.1`), or null when missing or malformed. */
  status: string | null;
  /** The address the report is about, without its type (`rfc822;`). */
  finalRecipient: string | null;
  /** What the remote server said (`smtp; 550 5.1.1 … User unknown`): for the log, never shown. */
  diagnosticCode: string | null;
}

export type Report =
  | { kind: "dsn"; recipients: DsnRecipient[] }
  | {
      kind: "feedback";
      feedbackType: string;
      originalRcptTo: string | null;
      /** What the report's copy of the original message says it is (see {@link OriginalMessage}). */
      original: OriginalMessage | null;
    }
  | { kind: "not_a_report"; reason: string };

/** Header blocks (RFC 3464 §2.1, RFC 5965 §3.1): `Name: value` lines, folded, blocks split by a blank line. */
export function fieldBlocks(text: string): Array<Map<string, string>> {
  const blocks: Array<Map<string, string>> = [];
  let block = new Map<string, string>();
  let last: string | undefined;
  for (const line of text.split(/\r?\n/)) {
    if (line.trim() === "") {
      if (block.size > 0) blocks.push(block);
      block = new Map();
      last = undefined;
      continue;
    }
    if (/^[ \t]/.test(line) && last !== undefined) {
      block.set(last, `${block.get(last) ?? ""} ${line.trim()}`);
      continue;
    }
    const colon = line.indexOf(":");
    if (colon <= 0) continue;
    last = line.slice(0, colon).trim().toLowerCase();
    // The first of a repeated field stays (a block names each field once).
    if (!block.has(last)) block.set(last, line.slice(colon + 1).trim());
  }
  if (block.size > 0) blocks.push(block);
  return blocks;
}

/** `rfc822; ada@example.com` → `ada@example.com` (lower-cased); null when there is no address. */
function addressOf(typed: string | undefined): string | null {
  if (!typed) return null;
  const semicolon = typed.indexOf(";");
  const address = (semicolon >= 0 ? typed.slice(semicolon + 1) : typed).trim().replace(/^<|>$/g, "");
  return address.includes("@") ? address.toLowerCase() : null;
}

/** `5.1.1 (bad destination mailbox address)` → `5.1.1`; null when not an enhanced status code. */
function statusOf(value: string | undefined): string | null {
  const code = value?.trim().split(/\s+/)[0] ?? "";
  return /^[245]\.\d{1,3}\.\d{1,3}$/.test(code) ? code : null;
}

/**
 * The identifying headers of the original message a feedback report carries (RFC 5965 §2: its
 * third part, `message/rfc822`, or `text/rfc822-headers`): ours set `X-Notification-Id: {id}` and
 * `Message-ID: <{id}@{from domain}>` (src/channels/email/providers/smtp.ts).
 */
export interface OriginalMessage {
  notificationId: string | null;
  messageId: string | null;
}

const ORIGINAL_PARTS = new Set(["message/rfc822", "text/rfc822-headers", "message/rfc822-headers"]);
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/**
 * The message a feedback report is about, from its copy of the original message (for the reports
 * that come to the fixed feedback address, not to a return path): the `X-Notification-Id` header,
 * else (absent or not a message id) the message id in `Message-ID: <{id}@…>`. Null when neither
 * names one. A relay may replace the `Message-ID` with its own: the header wins. (Requiring the two
 * to agree would stop no forger, who writes both; what protects a message is that its id cannot be
 * guessed, decision 0040.)
 */
export function messageIdOfOriginal(original: OriginalMessage | null): string | null {
  if (!original) return null;
  const fromHeader = original.notificationId?.trim().toLowerCase() ?? "";
  const fromMessageId =
    /^<?([^@<>\s]+)@[^<>\s]+>?$/.exec(original.messageId?.trim() ?? "")?.[1]?.toLowerCase() ?? "";
  const named = UUID.test(fromHeader) ? fromHeader : null;
  const identified = UUID.test(fromMessageId) ? fromMessageId : null;
  return named ?? identified;
}

const DSN_PARTS = new Set(["message/delivery-status", "message/global-delivery-status"]);
const FEEDBACK_PARTS = new Set(["message/feedback-report"]);

function text(content: ArrayBuffer | Uint8Array | string): string {
  return typeof content === "string" ? content : new TextDecoder().decode(content);
}

/** Parses a message that came to a return path. Never throws: what cannot be read is not a report. */
export async function parseReport(raw: Buffer): Promise<Report> {
  let email: Awaited<ReturnType<typeof PostalMime.parse>>;
  try {
    email = await PostalMime.parse(raw, { maxNestingDepth: 16, maxHeadersSize: 256 * 1024 });
  } catch {
    return { kind: "not_a_report", reason: "unparseable" };
  }
  const contentType = email.headers.find((header) => header.key === "content-type")?.value ?? "";
  if (!/^\s*multipart\/report\b/i.test(contentType))
    return { kind: "not_a_report", reason: "not_multipart_report" };
  const reportType = /;\s*report-type\s*=\s*"?([A-Za-z-]+)"?/i.exec(contentType)?.[1]?.toLowerCase();

  if (reportType === "delivery-status") {
    const part = email.attachments.find((attachment) => DSN_PARTS.has(attachment.mimeType));
    if (!part) return { kind: "not_a_report", reason: "no_delivery_status_part" };
    // The first block is about the message (Reporting-MTA, Arrival-Date); the others each about a recipient.
    const recipients = fieldBlocks(text(part.content))
      .slice(1)
      .filter((block) => block.has("action"))
      .map((block) => ({
        action: (block.get("action") ?? "").toLowerCase(),
        status: statusOf(block.get("status")),
        finalRecipient: addressOf(block.get("final-recipient") ?? block.get("original-recipient")),
        diagnosticCode: block.get("diagnostic-code") ?? null,
      }));
    if (recipients.length === 0) return { kind: "not_a_report", reason: "no_recipient_fields" };
    return { kind: "dsn", recipients };
  }
  if (reportType === "feedback-report") {
    const part = email.attachments.find((attachment) => FEEDBACK_PARTS.has(attachment.mimeType));
    if (!part) return { kind: "not_a_report", reason: "no_feedback_report_part" };
    const [fields] = fieldBlocks(text(part.content));
    const feedbackType = fields?.get("feedback-type")?.toLowerCase();
    if (!feedbackType) return { kind: "not_a_report", reason: "no_feedback_type" };
    const copy = email.attachments.find((attachment) => ORIGINAL_PARTS.has(attachment.mimeType));
    // Its header block: the lines up to the first blank one (folded lines joined).
    const headers = copy ? fieldBlocks(text(copy.content).split(/\r?\n\r?\n/, 1)[0] ?? "")[0] : undefined;
    return {
      kind: "feedback",
      feedbackType,
      originalRcptTo: addressOf(fields?.get("original-rcpt-to")),
      original: headers
        ? {
            notificationId: headers.get("x-notification-id")?.trim() ?? null,
            messageId: headers.get("message-id")?.trim() ?? null,
          }
        : null,
    };
  }
  return { kind: "not_a_report", reason: `report_type_${reportType ?? "missing"}` };
}

/**
 * ARF feedback types that are a complaint about the message (RFC 5965 §7.3): `not-spam` is the
 * opposite, and `auth-failure` (RFC 6591) a report on authentication, not on the recipient's wish.
 */
const COMPLAINT_TYPES = new Set(["abuse", "fraud", "virus", "other"]);

/**
 * What a report means for the message:
 * - `receipt`: a receipt to record (`bounced` for a DSN whose recipient `failed`, `delivered` for
 *   a positive DSN, `complained` for an abuse report); `suppress` says which recipient to
 *   suppress, and why, for a hard bounce (a `5.x.x` failure) or a complaint;
 * - `delayed`: the server is still trying (`Action: delayed`, or a `4.x.x` without `failed`):
 *   recorded in the history only (`recordDelay`: the delivery state does not move);
 * - `ignored`: nothing to record (not a report, `not-spam`, `relayed`, `expanded`).
 *
 * A DSN about several recipients: a failure wins (a `5.x.x` one first), then a delay, then a
 * delivery. A `failed` with a `4.x.x` (the server gave up retrying: Postfix's `4.4.1` after its
 * queue lifetime) is a bounce too, but not a hard one: no suppression.
 */
export type ReportVerdict =
  | {
      kind: "receipt";
      receipt: Receipt;
      suppress: { reason: "hard_bounce" | "complaint"; recipient: string | null } | null;
    }
  | { kind: "delayed"; delay: DeliveryDelay }
  | { kind: "ignored"; reason: string };

export function verdictOf(report: Report): ReportVerdict {
  if (report.kind === "not_a_report") return { kind: "ignored", reason: report.reason };
  if (report.kind === "feedback") {
    if (!COMPLAINT_TYPES.has(report.feedbackType))
      return { kind: "ignored", reason: `feedback_${report.feedbackType}` };
    return {
      kind: "receipt",
      receipt: receipt("complained", null, report.feedbackType),
      suppress: { reason: "complaint", recipient: report.originalRcptTo },
    };
  }
  const failed = report.recipients.filter((r) => r.action === "failed");
  const hard = failed.find((r) => r.status?.startsWith("5."));
  const bounce = hard ?? failed[0];
  if (bounce) {
    return {
      kind: "receipt",
      receipt: receipt("bounced", bounce.status, "failed"),
      suppress: hard ? { reason: "hard_bounce", recipient: hard.finalRecipient } : null,
    };
  }
  const delayed = report.recipients.find((r) => r.action === "delayed" || r.status?.startsWith("4."));
  if (delayed)
    return {
      kind: "delayed",
      delay: { errorCode: delayed.status, provider: EMAIL_RECEIPT_PROVIDER, providerStatus: "delayed" },
    };
  const delivered = report.recipients.find((r) => r.action === "delivered");
  if (delivered) return { kind: "receipt", receipt: receipt("delivered", null, "delivered"), suppress: null };
  return { kind: "ignored", reason: `action_${report.recipients[0]?.action || "missing"}` };
}

function receipt(state: Receipt["state"], errorCode: string | null, providerStatus: string): Receipt {
  return { state, errorCode, provider: EMAIL_RECEIPT_PROVIDER, providerStatus, providerMessageId: null };
}
