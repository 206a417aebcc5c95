import { describe, expect, it } from "vitest";
import {
  fieldBlocks,
  messageIdOfOriginal,
  parseReport,
  verdictOf,
} from "../../../src/channels/email/bounces/reports.js";
import { messageIdOfReturnPath, returnPath } from "../../../src/channels/email/bounces/verp.js";

const SETTINGS = { domain: "bounces.example.com", localPart: "bounce" };
const ID = "0193a0b2-7c4d-7e8f-9a0b-1c2d3e4f5a6b";

function dsn(
  statusPart: string,
  partType = "message/delivery-status",
  reportType = "delivery-status",
): Buffer {
  return Buffer.from(
    [
      "From: MAILER-DAEMON@mx.example.net",
      "MIME-Version: 1.0",
      `Content-Type: multipart/report; report-type="${reportType}"; boundary="b1"`,
      "",
      "--b1",
      "Content-Type: text/plain",
      "",
      "Delivery failed.",
      "--b1",
      `Content-Type: ${partType}`,
      "",
      statusPart,
      "--b1--",
      "",
    ].join("\r\n"),
  );
}

describe("VERP return paths", () => {
  it("round-trips a message id, case-insensitively, and reads nothing else", () => {
    const address = returnPath(SETTINGS, ID.toUpperCase());
    expect(address).toBe(`bounce+${ID}@bounces.example.com`);
    expect(messageIdOfReturnPath(SETTINGS, address)).toBe(ID);
    expect(messageIdOfReturnPath(SETTINGS, address.toUpperCase())).toBe(ID);
    for (const other of [
      `bounce+${ID}@example.com`,
      `bounce+${ID}@sub.bounces.example.com`,
      `bounces+${ID}@bounces.example.com`,
      `bounce-${ID}@bounces.example.com`,
      `bounce+${ID}x@bounces.example.com`,
      "bounce+@bounces.example.com",
      "bounces.example.com",
      "",
    ]) {
      expect(messageIdOfReturnPath(SETTINGS, other), other).toBeNull();
    }
  });
});

describe("report fields", () => {
  it("splits blocks at blank lines, unfolds continuation lines and lower-cases names", () => {
    expect(
      fieldBlocks(
        "Reporting-MTA: dns; mx\r\n\r\nAction: failed\r\nDiagnostic-Code: smtp; 550\r\n  User unknown\r\n",
      ),
    ).toEqual([
      new Map([["reporting-mta", "dns; mx"]]),
      new Map([
        ["action", "failed"],
        ["diagnostic-code", "smtp; 550 User unknown"],
      ]),
    ]);
  });
});

describe("parsing and mapping reports", () => {
  it("several recipients: a 5.x.x failure wins over a delay and a delivery, and names the recipient to suppress", async () => {
    const report = await parseReport(
      dsn(
        [
          "Reporting-MTA: dns; mx.example.net",
          "",
          "Final-Recipient: rfc822; ok@example.com",
          "Action: delivered",
          "Status: 2.0.0",
          "",
          "Final-Recipient: rfc822; slow@example.com",
          "Action: delayed",
          "Status: 4.2.0",
          "",
          "Final-Recipient: rfc822;<Gone@Example.com>",
          "Action: failed",
          "Status: 5.1.1 (bad destination mailbox address)",
        ].join("\r\n"),
      ),
    );
    expect(verdictOf(report)).toEqual({
      kind: "receipt",
      receipt: {
        state: "bounced",
        errorCode: "5.1.1",
        provider: "smtp",
        providerStatus: "failed",
        providerMessageId: null,
      },
      suppress: { reason: "hard_bounce", recipient: "gone@example.com" },
    });
  });

  it("a delay alone is `delayed`; a positive DSN is `delivered`; relayed is nothing", async () => {
    const part = (action: string, status: string) =>
      [
        "Reporting-MTA: dns; mx",
        "",
        "Final-Recipient: rfc822; a@example.com",
        `Action: ${action}`,
        `Status: ${status}`,
      ].join("\r\n");
    expect(verdictOf(await parseReport(dsn(part("delayed", "4.4.1"))))).toEqual({
      kind: "delayed",
      delay: { errorCode: "4.4.1", provider: "smtp", providerStatus: "delayed" },
    });
    expect(verdictOf(await parseReport(dsn(part("delivered", "2.0.0"))))).toMatchObject({
      kind: "receipt",
      receipt: { state: "delivered", errorCode: null },
      suppress: null,
    });
    expect(verdictOf(await parseReport(dsn(part("relayed", "2.0.0"))))).toEqual({
      kind: "ignored",
      reason: "action_relayed",
    });
  });

  it("reads message/global-delivery-status (RFC 6533) as well", async () => {
    const part = [
      "Reporting-MTA: dns; mx",
      "",
      "Final-Recipient: utf-8; josé@example.com",
      "Action: failed",
      "Status: 5.1.1",
    ].join("\r\n");
    expect(verdictOf(await parseReport(dsn(part, "message/global-delivery-status")))).toMatchObject({
      kind: "receipt",
      suppress: { recipient: "josé@example.com" },
    });
  });

  it("is not a report: no multipart/report, another report type, no recipient block, garbage", async () => {
    const part = ["Reporting-MTA: dns; mx", "", "Action: failed", "Status: 5.1.1"].join("\r\n");
    expect(await parseReport(Buffer.from("Subject: hi\r\n\r\nhello\r\n"))).toEqual({
      kind: "not_a_report",
      reason: "not_multipart_report",
    });
    expect(await parseReport(dsn(part, "message/delivery-status", "disposition-notification"))).toMatchObject(
      {
        kind: "not_a_report",
      },
    );
    expect(await parseReport(dsn("Reporting-MTA: dns; mx"))).toEqual({
      kind: "not_a_report",
      reason: "no_recipient_fields",
    });
    expect(await parseReport(dsn(part, "text/plain"))).toEqual({
      kind: "not_a_report",
      reason: "no_delivery_status_part",
    });
    expect((await parseReport(Buffer.from([0, 255, 13, 10, 13, 10, 1, 2, 3]))).kind).toBe("not_a_report");
  });

  it("a failure without a status is a bounce but not a hard one", async () => {
    const part = [
      "Reporting-MTA: dns; mx",
      "",
      "Final-Recipient: rfc822; a@example.com",
      "Action: failed",
      "Status: bogus",
    ].join("\r\n");
    expect(verdictOf(await parseReport(dsn(part)))).toMatchObject({
      kind: "receipt",
      receipt: { state: "bounced", errorCode: null },
      suppress: null,
    });
  });
});

describe("messageIdOfOriginal: which message a report to the feedback address is about", () => {
  const original = (notificationId: string | null, messageId: string | null) => ({
    notificationId,
    messageId,
  });
  it("takes X-Notification-Id, else the id in Message-ID", () => {
    expect(messageIdOfOriginal(original(ID, `<${ID}@acme.test>`))).toBe(ID);
    // A relay's own Message-ID: the header wins.
    expect(messageIdOfOriginal(original(ID, "<0193a0b2-7c4d-7e8f-9a0b-000000000000@relay.example>"))).toBe(
      ID,
    );
    // A header that names no message id: the Message-ID's.
    expect(messageIdOfOriginal(original("42", `<${ID}@acme.test>`))).toBe(ID);
    expect(messageIdOfOriginal(original(` ${ID.toUpperCase()} `, null))).toBe(ID);
    expect(messageIdOfOriginal(original(null, `<${ID}@acme.test>`))).toBe(ID);
    expect(messageIdOfOriginal(original(null, `${ID}@acme.test`))).toBe(ID);
  });
  it("names nothing for another sender's message, a malformed header without a Message-ID of ours, or no copy", () => {
    expect(messageIdOfOriginal(null)).toBeNull();
    expect(messageIdOfOriginal(original(null, null))).toBeNull();
    expect(messageIdOfOriginal(original(null, "<CAF=abc@mail.gmail.example>"))).toBeNull();
    expect(messageIdOfOriginal(original("42", "<CAF=abc@mail.gmail.example>"))).toBeNull();
  });
  it("is read from the report's copy of the original message (message/rfc822 or text/rfc822-headers)", async () => {
    for (const type of ["message/rfc822", "text/rfc822-headers"]) {
      const raw = [
        "MIME-Version: 1.0",
        'Content-Type: multipart/report; report-type=feedback-report; boundary="b1"',
        "",
        "--b1",
        "Content-Type: message/feedback-report",
        "",
        "Feedback-Type: abuse",
        "Version: 1",
        "",
        "--b1",
        `Content-Type: ${type}`,
        "",
        "From: ACME <hello@acme.test>",
        `Message-ID: <${ID}@acme.test>`,
        "X-Notification-Id:",
        ` ${ID}`,
        "",
        "X-Notification-Id: 0193a0b2-7c4d-7e8f-9a0b-000000000000 (a body line, not a header)",
        "--b1--",
        "",
      ].join("\r\n");
      const report = await parseReport(Buffer.from(raw));
      expect(report, type).toMatchObject({ kind: "feedback", original: { notificationId: ID } });
      if (report.kind !== "feedback") throw new Error("not feedback");
      expect(messageIdOfOriginal(report.original)).toBe(ID);
    }
  });
});
