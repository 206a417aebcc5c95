import { describe, expect, it } from "vitest";
import { parseSmsSender, smsSenderKind, smsSenderLimitKey } from "../../../src/runtime/sms-sender-id.js";

describe("SMS sender ids: one normal form for requests, registrations and throughput limits", () => {
  it("keeps alphanumeric ids and short codes as given (trimmed), and turns numbers into E.164", () => {
    expect(parseSmsSender(" Acme ")).toEqual({ value: "Acme", kind: "alphanumeric" });
    expect(parseSmsSender("MY SHOP")).toEqual({ value: "MY SHOP", kind: "alphanumeric" });
    expect(parseSmsSender("12345")).toEqual({ value: "12345", kind: "short_code" });
    expect(parseSmsSender("+1 (415) 555-0100")).toEqual({ value: "+14155550100", kind: "number" });
  });

  it("refuses what is none of them", () => {
    for (const value of ["", "12", "123456789", "TWELVE CHARS", "4155550100", "+1415555", "AC-ME"]) {
      expect(parseSmsSender(value), value).toBeUndefined();
    }
  });

  it("tells a normalised sender's kind, and limits alphanumeric ids whatever their case", () => {
    expect(["ACME", "12345", "+14155550100", "1A"].map(smsSenderKind)).toEqual([
      "alphanumeric",
      "short_code",
      "number",
      "alphanumeric",
    ]);
    expect(smsSenderLimitKey("Acme")).toBe("ACME");
    expect(smsSenderLimitKey("+14155550100")).toBe("+14155550100");
    expect(smsSenderLimitKey("12345")).toBe("12345");
  });
});
