import { describe, expect, it } from "vitest";
import {
  cleanDetail,
  cleanMessage,
  failedOutcome,
  MAX_DETAIL_LENGTH,
  MAX_ERROR_MESSAGE_LENGTH,
  redact,
  redactRecipients,
  truncate,
} from "../../../src/channels/providers/redact.js";

describe("redact", () => {
  it("replaces every occurrence of every secret", () => {
    expect(redact("token abc and abc, key xyz", ["abc", "xyz"])).toBe(
      "token [redacted] and [redacted], key [redacted]",
    );
  });

  it("ignores empty secrets (which would otherwise match between every character)", () => {
    expect(redact("plain text", ["", "text"])).toBe("plain [redacted]");
    expect(redact("plain text", [])).toBe("plain text");
  });
});

describe("truncate", () => {
  it("keeps text that fits, and cuts longer text to max characters ending in an ellipsis", () => {
    expect(truncate("12345", 5)).toBe("12345");
    expect(truncate("123456", 5)).toBe("1234…");
  });
});

describe("cleanMessage and failedOutcome", () => {
  it("redacts before cutting, so a secret across the cut cannot leak in part", () => {
    const secret = "s".repeat(40);
    const message = `${"x".repeat(MAX_ERROR_MESSAGE_LENGTH - 20)}${secret}${"y".repeat(40)}`;
    const cleaned = cleanMessage(message, [secret]);
    expect(cleaned).not.toContain("s");
    expect(cleaned).toContain("[redacted]");
    expect(cleaned.length).toBe(MAX_ERROR_MESSAGE_LENGTH);
    expect(cleaned.endsWith("…")).toBe(true);
  });

  it("a failed outcome keeps the error's fields and cleans its message", () => {
    const error = {
      class: "transient" as const,
      code: "timeout",
      message: "token hunter2 timed out",
      retryAfterMs: 5,
    };
    expect(failedOutcome("twilio", error, ["hunter2"])).toStrictEqual({
      ok: false,
      provider: "twilio",
      error: { class: "transient", code: "timeout", message: "token [redacted] timed out", retryAfterMs: 5 },
    });
  });
});

describe("a provider's detail, for the log", () => {
  it("has every recipient replaced whatever its case, regular-expression characters included", () => {
    expect(
      redactRecipients("550 5.1.1 <Ada.L+news@Example.com>: rejected; also bob@example.com", [
        "ada.l+news@example.com",
        "bob@example.com",
        "",
      ]),
    ).toBe("550 5.1.1 <[recipient]>: rejected; also [recipient]");
    expect(redactRecipients("The 'To' number +14155550100 is invalid", ["+14155550100"])).toBe(
      "The 'To' number [recipient] is invalid",
    );
    expect(redactRecipients("nothing to hide", [])).toBe("nothing to hide");
  });

  it("is redacted of secrets, flattened to one line and cut", () => {
    expect(cleanDetail("line one\r\n\tkey s3cret\u0000", ["s3cret"])).toBe("line one key [redacted]");
    expect(cleanDetail("x".repeat(5000), []).length).toBe(MAX_DETAIL_LENGTH);
  });

  it("rides beside the error in a failed outcome, and only when there is one", () => {
    const error = { class: "permanent" as const, code: "http_400", message: "The service answered HTTP 400" };
    expect(failedOutcome("p", error, ["tok"], "body with tok")).toStrictEqual({
      ok: false,
      provider: "p",
      error,
      detail: "body with [redacted]",
    });
    expect(failedOutcome("p", error, [])).toStrictEqual({ ok: false, provider: "p", error });
  });
});
