import { describe, expect, it } from "vitest";
import { emailDomainOf, normaliseDomain, txtRecordsProve } from "../../../src/domain/senders.js";

describe("normaliseDomain", () => {
  it.each([
    ["example.com", "example.com"],
    [" Mail.Example.COM. ", "mail.example.com"],
    ["xn--bcher-kva.example", "xn--bcher-kva.example"],
    ["a-b.c0.io", "a-b.c0.io"],
  ])("takes %j as %j", (value, domain) => {
    expect(normaliseDomain(value)).toBe(domain);
  });

  it.each([
    "",
    "com",
    "localhost",
    "10.0.0.1",
    "a..example",
    "-a.example",
    "a-.example",
    "a_b.example",
    "bücher.example",
    "a b.example",
    `${"a".repeat(64)}.example`,
    `${"a.".repeat(127)}example`,
  ])("refuses %j", (value) => {
    expect(normaliseDomain(value)).toBeUndefined();
  });
});

describe("emailDomainOf", () => {
  it("is the part after the last @, lower case", () => {
    expect(emailDomainOf("Ada@Example.COM")).toBe("example.com");
    expect(emailDomainOf('"a@b"@example.com')).toBe("example.com");
  });
});

describe("txtRecordsProve", () => {
  const token = "ntf-verify=abc";
  it("finds the token in any record, its strings joined, surrounding spaces ignored", () => {
    expect(txtRecordsProve([["v=spf1 -all"], ["ntf-verify=", "abc"]], token)).toBe(true);
    expect(txtRecordsProve([[" ntf-verify=abc "]], token)).toBe(true);
  });
  it("is false for no record, another token, or the token inside a longer value", () => {
    expect(txtRecordsProve([], token)).toBe(false);
    expect(txtRecordsProve([["ntf-verify=abd"]], token)).toBe(false);
    expect(txtRecordsProve([["x ntf-verify=abc"]], token)).toBe(false);
  });
});
