import type { AddressInfo } from "node:net";
import { SMTPServer, type SMTPServerDataStream, type SMTPServerSession } from "smtp-server";
import type { SqlClient as Sql } from "../../db/client.js";
import {
  messageIdOfOriginal,
  parseReport,
  type ReportVerdict,
  verdictOf,
} from "../channels/email/bounces/reports.js";
import { messageIdOfReturnPath, type ReturnPathSettings } from "../channels/email/bounces/verp.js";
import { fold } from "../domain/state.js";
import { type ReceiptOutcome, type ReceiptStore, recordDelay, recordReceipt } from "../messages/receipts.js";
import type { Logger } from "../runtime/logger.js";
import { appendEvents, loadEvents } from "../store/events.js";
import type { BouncesTls } from "./config.js";

/**
 * The `bounces` process's SMTP listener (docs/decisions/0040): the MX of `BOUNCE_DOMAIN`. It takes
 * the DSNs and abuse reports mail servers send to a message's return path
 * (`bounce+{message_id}@BOUNCE_DOMAIN`) and records them as the message's delivery receipts.
 *
 * - RCPT: only a return path of ours (the prefix, a UUID, the domain), or the feedback address
 *   (`BOUNCES_FEEDBACK_ADDRESS`) where feedback loops send their abuse reports; anything else 550.
 *   So it never relays, and takes no mail for anyone. A complaint to the feedback address names
 *   its message by the copy of our original it carries (`X-Notification-Id`, `Message-ID`).
 * - No AUTH (an MX is not logged in to); STARTTLS offered (never required) when the operator gave
 *   a certificate (`BOUNCES_TLS_KEY_FILE` / `_CERT_FILE`).
 * - Size: `SIZE` announced and enforced (`MAX_REPORT_BYTES`: 552); connections: at most
 *   `BOUNCES_MAX_CLIENTS` in all and `BOUNCES_MAX_CONNECTIONS_PER_IP` from one address (421).
 * - Every message that passed RCPT is answered 250 whatever it says (an unknown message id, a
 *   message of another channel or provider, an out-of-office reply, a forged or broken report:
 *   nothing recorded, logged and counted), so the sender does not retry it for days. Only a
 *   failure of ours (the database) is answered 451: the sender tries again later.
 */

/** A DSN is a few KiB; with the original message attached, rarely more than a few hundred. */
export const MAX_REPORT_BYTES = 1024 * 1024;
/** Return paths one message may be addressed to: a report names one message. */
const MAX_RECIPIENTS = 5;

/** What came of a message (or a refused recipient), as counted and logged. */
export type BounceOutcome =
  | ReceiptOutcome
  | "delayed"
  | "not_a_report"
  | "unidentified"
  | "refused_recipient"
  | "too_large"
  | "error";

export interface BounceIntakeOptions {
  sql: Sql;
  logger: Logger;
  returnPath: ReturnPathSettings;
  maxClients: number;
  maxConnectionsPerIp: number;
  now?: () => Date;
  /** Idle time before a connection is closed (smtp-server's default is 60 s). */
  socketTimeoutMs?: number;
  /**
   * `BOUNCES_FEEDBACK_ADDRESS`: the fixed address feedback loops send abuse reports to; accepted
   * at RCPT besides the return paths. Unset: refused like any other address.
   */
  feedbackAddress?: string;
  /**
   * The certificate for STARTTLS (`BOUNCES_TLS_KEY_FILE` / `_CERT_FILE`): offered, never required
   * (an MX must take mail from servers that cannot). Without it no STARTTLS is offered.
   */
  tls?: BouncesTls;
  /**
   * Told of each permanent (`5.x.x`) failure or complaint of a recorded e-mail, with the recipient
   * the report names (`Final-Recipient` of a DSN, `Original-Rcpt-To` of an abuse report; null when
   * it does not say), for `recorded` and `duplicate` receipts alike (tests). The suppression list's
   * entry itself is added by `recordReceipt`, from the message's own recipient
   * (docs/decisions/0039), so a report cannot name another address to suppress.
   */
  onBounceOrComplaint?: (sql: Sql, entry: SuppressionCandidate) => Promise<void>;
}

export interface BounceIntake {
  /** How many of each outcome so far (also in the log, one line per message). */
  readonly counts: ReadonlyMap<BounceOutcome, number>;
  listen(port: number, host: string): Promise<number>;
  close(): Promise<void>;
}

export interface SuppressionCandidate {
  messageId: string;
  /** Lower-cased; null when the report does not name it. */
  recipient: string | null;
  reason: "hard_bounce" | "complaint";
}

function smtpError(responseCode: number, message: string): Error {
  return Object.assign(new Error(message), { responseCode });
}

export function createBounceIntake(options: BounceIntakeOptions): BounceIntake {
  const { sql, logger, returnPath } = options;
  const now = options.now ?? (() => new Date());
  const counts = new Map<BounceOutcome, number>();
  const count = (outcome: BounceOutcome) => counts.set(outcome, (counts.get(outcome) ?? 0) + 1);
  const perIp = new Map<string, number>();
  const feedbackAddress = options.feedbackAddress?.toLowerCase();
  const isFeedbackAddress = (address: string) =>
    feedbackAddress !== undefined && address.toLowerCase() === feedbackAddress;
  // The store's two functions a receipt needs; content stays sealed (a receipt reads none). A
  // hard bounce or a complaint suppresses the message's recipient in the receipt's own append.
  const store: ReceiptStore = {
    loadMessage: async (messageId: string) => {
      const events = await loadEvents(sql, messageId);
      return { state: fold(events.map((stored) => stored.event)), events };
    },
    append: (state, events, suppress) => appendEvents(sql, state, events, suppress),
  };

  /** Records what a report says of one message; `verdict` is not `ignored`. */
  async function recordFor(messageId: string, verdict: Exclude<ReportVerdict, { kind: "ignored" }>) {
    if (verdict.kind === "delayed") {
      // History only: the delivery state does not move, no webhook (docs/decisions/0040).
      const { delay } = verdict;
      const recorded = await recordDelay(store, { messageId, channel: "email", delay, now: now() });
      const outcome = recorded === "recorded" ? "delayed" : recorded;
      count(outcome);
      logger.info({ messageId, outcome, errorCode: delay.errorCode }, "delayed DSN");
      return;
    }
    const { receipt } = verdict;
    const outcome = await recordReceipt(store, { messageId, channel: "email", receipt, now: now() });
    count(outcome);
    const fields = { messageId, outcome, state: receipt.state, errorCode: receipt.errorCode };
    if (outcome === "recorded" || outcome === "duplicate") {
      logger.info(fields, "e-mail delivery receipt");
      if (verdict.suppress) await options.onBounceOrComplaint?.(sql, { messageId, ...verdict.suppress });
    } else logger.info(fields, "e-mail delivery receipt not recorded");
  }

  /**
   * A message to the return paths `messageIds` (each names its message) and, with `toFeedback`, to
   * the feedback address, where only a complaint counts and names its message by the copy of the
   * original it carries.
   */
  async function handle(raw: Buffer, messageIds: string[], toFeedback: boolean): Promise<void> {
    const report = await parseReport(raw);
    const verdict = verdictOf(report);
    for (const messageId of messageIds) {
      if (verdict.kind === "ignored") {
        count("not_a_report");
        logger.info(
          { messageId, outcome: "not_a_report", reason: verdict.reason },
          "message to a return path that is no report",
        );
        continue;
      }
      await recordFor(messageId, verdict);
    }
    if (!toFeedback) return;
    if (report.kind !== "feedback" || verdict.kind !== "receipt") {
      count("not_a_report");
      const reason = verdict.kind === "ignored" ? verdict.reason : `${report.kind}_to_feedback_address`;
      logger.info(
        { outcome: "not_a_report", reason },
        "message to the feedback address that is no complaint",
      );
      return;
    }
    const messageId = messageIdOfOriginal(report.original);
    if (!messageId) {
      count("unidentified");
      logger.info(
        { outcome: "unidentified", original: report.original !== null },
        "complaint to the feedback address that names no message of ours",
      );
      return;
    }
    // Sent to its return path too: recorded once, above.
    if (!messageIds.includes(messageId)) await recordFor(messageId, verdict);
  }

  const server = new SMTPServer({
    name: returnPath.domain,
    banner: "bounces only",
    logger: false,
    authOptional: true,
    // No AUTH (an MX is not logged in to); STARTTLS only with a certificate of the operator's
    // (smtp-server's built-in one has a published private key).
    disabledCommands: options.tls ? ["AUTH"] : ["AUTH", "STARTTLS"],
    ...(options.tls && { key: options.tls.key, cert: options.tls.cert }),
    disableReverseLookup: true,
    size: MAX_REPORT_BYTES,
    maxClients: options.maxClients,
    socketTimeout: options.socketTimeoutMs ?? 60_000,
    closeTimeout: 5_000,
    onConnect(session, callback) {
      const open = perIp.get(session.remoteAddress) ?? 0;
      if (open >= options.maxConnectionsPerIp) {
        // onClose still runs for this session: count it so the decrement there balances.
        perIp.set(session.remoteAddress, open + 1);
        return callback(smtpError(421, "4.7.0 Too many connections from your address, try again later"));
      }
      perIp.set(session.remoteAddress, open + 1);
      callback();
    },
    onClose(session) {
      const open = (perIp.get(session.remoteAddress) ?? 1) - 1;
      if (open <= 0) perIp.delete(session.remoteAddress);
      else perIp.set(session.remoteAddress, open);
    },
    onRcptTo(address, session, callback) {
      const feedback = isFeedbackAddress(address.address);
      if (feedback && session.envelope.rcptTo.some((rcpt) => isFeedbackAddress(rcpt.address)))
        return callback(smtpError(452, "4.5.3 Recipient already given"));
      if (!feedback && !messageIdOfReturnPath(returnPath, address.address)) {
        count("refused_recipient");
        return callback(smtpError(550, "5.1.1 No such recipient here"));
      }
      if (session.envelope.rcptTo.length >= MAX_RECIPIENTS)
        return callback(smtpError(452, "4.5.3 Too many recipients"));
      callback();
    },
    onData(stream: SMTPServerDataStream, session: SMTPServerSession, callback) {
      const chunks: Buffer[] = [];
      let bytes = 0;
      stream.on("data", (chunk: Buffer) => {
        bytes += chunk.length;
        // Past the limit nothing more is kept; the stream is still read to its end.
        if (bytes <= MAX_REPORT_BYTES) chunks.push(chunk);
      });
      stream.on("end", () => {
        if (stream.sizeExceeded || bytes > MAX_REPORT_BYTES) {
          count("too_large");
          return callback(smtpError(552, "5.3.4 Message too big"));
        }
        const ids = session.envelope.rcptTo.flatMap(
          (rcpt) => messageIdOfReturnPath(returnPath, rcpt.address) ?? [],
        );
        const toFeedback = session.envelope.rcptTo.some((rcpt) => isFeedbackAddress(rcpt.address));
        handle(Buffer.concat(chunks), [...new Set(ids)], toFeedback).then(
          () => callback(null, "2.0.0 Report taken"),
          (error: unknown) => {
            count("error");
            logger.error({ err: error }, "could not record an e-mail report; the sender will retry");
            callback(smtpError(451, "4.3.0 Temporary failure, try again later"));
          },
        );
      });
    },
  });
  server.on("error", (error) => logger.warn({ err: error }, "bounces SMTP server error"));

  return {
    counts,
    listen: (port, host) =>
      new Promise((resolve, reject) => {
        server.server.once("error", reject);
        server.listen(port, host, () => {
          server.server.off("error", reject);
          resolve((server.server.address() as AddressInfo).port);
        });
      }),
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}
