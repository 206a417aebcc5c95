import { describe, expect, it } from "vitest";
import { clientLimitKey } from "../../../src/http/client-ip.js";

describe("the key a per-client limit counts by", () => {
  it("is an IPv4 address itself", () => {
    expect(clientLimitKey("203.0.113.7")).toBe("203.0.113.7");
  });

  it("is the IPv4 address of an IPv4-mapped IPv6 address, as a dual-stack socket writes it", () => {
    expect(clientLimitKey("::ffff:203.0.113.7")).toBe("203.0.113.7");
  });

  it("is the /64 of an IPv6 address, however it is written", () => {
    const key = "2001:db8:1:2::/64";
    expect(clientLimitKey("2001:db8:1:2::1")).toBe(key);
    expect(clientLimitKey("2001:db8:1:2:ffff:ffff:ffff:ffff")).toBe(key);
    expect(clientLimitKey("2001:DB8:0001:0002:0:0:0:abcd")).toBe(key);
  });

  it("tells two /64s apart, even next to each other", () => {
    expect(clientLimitKey("2001:db8:1:2::1")).not.toBe(clientLimitKey("2001:db8:1:3::1"));
  });

  it("is anything that is not an address as it is", () => {
    expect(clientLimitKey("unknown")).toBe("unknown");
  });
});
