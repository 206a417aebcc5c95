import twilio from "twilio";
import { describe, expect, it } from "vitest";
import {
  formParams,
  TWILIO_STATUSES_NOT_RECEIPTS,
  twilioCallback,
  twilioSignature,
  twilioStatusCallbackUrl,
  verifyTwilioSignature,
} from "../../../src/channels/sms/receipts/twilio.js";

/**
 * Our check of `X-Twilio-Signature` against Twilio's own code: every signature here is made by
 * the official `twilio` package's helper, never by the code under test.
 */

const AUTH_TOKEN = "12345678901234567890123456789012";
const URL_ = "https://notify.example.com/callbacks/twilio/sms/0b9d7a52-5d3c-4f7e-9a51-2f3e5f1c0d11";

/** A status callback's fields as Twilio posts them. */
function callbackFields(overrides: Record<string, string> = {}): Record<string, string> {
  return {
    ApiVersion: "2010-04-01",
    AccountSid: "AC0123456789abcdef0123456789abcdef",
    From: "+15017122661",
    To: "+447700900123",
    MessageSid: "SM1234567890abcdef1234567890abcdef",
    SmsSid: "SM1234567890abcdef1234567890abcdef",
    MessageStatus: "delivered",
    SmsStatus: "delivered",
    ...overrides,
  };
}

const formOf = (fields: Record<string, string>) => formParams(new URLSearchParams(fields).toString());

describe("X-Twilio-Signature", () => {
  it("a signature made by twilio.getExpectedTwilioSignature is accepted", () => {
    for (const fields of [
      callbackFields(),
      callbackFields({ MessageStatus: "undelivered", SmsStatus: "undelivered", ErrorCode: "30003" }),
      callbackFields({ Body: "café & ünïcode + spaces=equals" }),
      {},
    ]) {
      const header = twilio.getExpectedTwilioSignature(AUTH_TOKEN, URL_, fields);
      expect(verifyTwilioSignature(AUTH_TOKEN, URL_, formOf(fields), header)).toBe(true);
      // And ours computes exactly Twilio's.
      expect(twilioSignature(AUTH_TOKEN, URL_, formOf(fields))).toBe(header);
    }
  });

  it("a parameter repeated is signed as Twilio's helper signs it", () => {
    const body = "B=2&A=x&B=1&B=2";
    const header = twilio.getExpectedTwilioSignature(AUTH_TOKEN, URL_, { A: "x", B: ["2", "1", "2"] });
    expect(verifyTwilioSignature(AUTH_TOKEN, URL_, formParams(body), header)).toBe(true);
  });

  it("what Twilio's validateRequest accepts, ours accepts, and the other way round", () => {
    const fields = callbackFields({ MessageStatus: "sent", SmsStatus: "sent" });
    const good = twilio.getExpectedTwilioSignature(AUTH_TOKEN, URL_, fields);
    const candidates = [
      good,
      twilio.getExpectedTwilioSignature("another-token-000000000000000000", URL_, fields),
      twilio.getExpectedTwilioSignature(AUTH_TOKEN, `${URL_}x`, fields),
      twilio.getExpectedTwilioSignature(AUTH_TOKEN, URL_, { ...fields, ErrorCode: "30003" }),
      good.slice(0, -2),
      "",
    ];
    for (const header of candidates) {
      expect(verifyTwilioSignature(AUTH_TOKEN, URL_, formOf(fields), header), header).toBe(
        twilio.validateRequest(AUTH_TOKEN, header, URL_, fields),
      );
    }
    expect(candidates.filter((h) => verifyTwilioSignature(AUTH_TOKEN, URL_, formOf(fields), h))).toEqual([
      good,
    ]);
  });

  it("the URL signed with or without its scheme's default port is accepted, as Twilio's helper does", () => {
    const fields = callbackFields();
    const withPort = URL_.replace("notify.example.com", "notify.example.com:443");
    const header = twilio.getExpectedTwilioSignature(AUTH_TOKEN, withPort, fields);
    expect(twilio.validateRequest(AUTH_TOKEN, header, URL_, fields)).toBe(true);
    expect(verifyTwilioSignature(AUTH_TOKEN, URL_, formOf(fields), header)).toBe(true);
    // Another port is another URL.
    const other = twilio.getExpectedTwilioSignature(AUTH_TOKEN, URL_.replace(".com", ".com:8443"), fields);
    expect(verifyTwilioSignature(AUTH_TOKEN, URL_, formOf(fields), other)).toBe(false);
  });

  it("a missing header or an empty auth token never passes", () => {
    const fields = callbackFields();
    expect(verifyTwilioSignature(AUTH_TOKEN, URL_, formOf(fields), undefined)).toBe(false);
    expect(
      verifyTwilioSignature("", URL_, formOf(fields), twilio.getExpectedTwilioSignature("", URL_, fields)),
    ).toBe(false);
  });
});

describe("the status callback URL", () => {
  it("is PUBLIC_BASE_URL, the channel's path and our message id", () => {
    expect(twilioStatusCallbackUrl("https://n.example.com/x/", "abc")).toBe(
      "https://n.example.com/x/callbacks/twilio/sms/abc",
    );
    expect(twilioStatusCallbackUrl("https://n.example.com", "abc")).toBe(
      "https://n.example.com/callbacks/twilio/sms/abc",
    );
  });
});

describe("MessageStatus and ErrorCode as a delivery receipt", () => {
  const receiptOf = (fields: Record<string, string>) => twilioCallback(formOf(callbackFields(fields)));

  it.each([
    ["sent", "sent"],
    ["delivered", "delivered"],
    ["read", "delivered"],
    ["undelivered", "undelivered"],
    ["failed", "undelivered"],
  ])("%s is %s", (status, state) => {
    expect(receiptOf({ MessageStatus: status, SmsStatus: status })).toEqual({
      kind: "receipt",
      receipt: {
        state,
        errorCode: null,
        provider: "twilio",
        providerStatus: status,
        providerMessageId: "SM1234567890abcdef1234567890abcdef",
      },
    });
  });

  it.each(["30003", "30004", "30005", "30006", "30007", "30008", "21610", "30001"])(
    "undelivered / failed keep ErrorCode %s",
    (code) => {
      for (const status of ["undelivered", "failed"]) {
        const callback = receiptOf({ MessageStatus: status, ErrorCode: code });
        expect(callback.kind === "receipt" && callback.receipt).toMatchObject({
          state: "undelivered",
          errorCode: code,
        });
      }
    },
  );

  it("an ErrorCode on a status that did not fail, or one that is no code, is not kept", () => {
    const sent = receiptOf({ MessageStatus: "sent", ErrorCode: "30003" });
    expect(sent.kind === "receipt" && sent.receipt.errorCode).toBeNull();
    const odd = receiptOf({ MessageStatus: "undelivered", ErrorCode: "<script>" });
    expect(odd.kind === "receipt" && odd.receipt.errorCode).toBeNull();
  });

  it.each([...TWILIO_STATUSES_NOT_RECEIPTS, "something-new"])("%s is not a receipt", (status) => {
    expect(receiptOf({ MessageStatus: status, SmsStatus: status })).toEqual({
      kind: "not_a_receipt",
      status,
    });
  });

  it("a callback without a status, or with a SID that is no SID, is malformed", () => {
    expect(twilioCallback(formOf({ MessageSid: "SM1" }))).toEqual({
      kind: "malformed",
      problem: "no MessageStatus",
    });
    expect(receiptOf({ MessageSid: "SM1; drop table" })).toEqual({
      kind: "malformed",
      problem: "MessageSid is not a SID",
    });
  });

  it("the older SmsStatus / SmsSid names are read when the newer are absent", () => {
    const callback = twilioCallback(formOf({ SmsStatus: "delivered", SmsSid: "SMabc" }));
    expect(callback).toMatchObject({
      kind: "receipt",
      receipt: { state: "delivered", providerMessageId: "SMabc" },
    });
  });
});
