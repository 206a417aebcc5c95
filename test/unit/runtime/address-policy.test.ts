import { describe, expect, it } from "vitest";
import { AddressPolicy, parseNetworks } from "../../../src/runtime/outbound/address-policy.js";

describe("the outbound address policy", () => {
  const policy = new AddressPolicy();

  it.each([
    ["8.8.8.8", "public IPv4"],
    ["172.32.0.1", "just past 172.16/12"],
    ["100.128.0.1", "just past CGNAT"],
    ["2001:4860:4860::8888", "public IPv6"],
    ["::ffff:8.8.8.8", "a public IPv4 address mapped into IPv6"],
    ["64:ff9b::808:808", "a public IPv4 address through NAT64"],
    ["2002:808:808::1", "a public IPv4 address's 6to4 network"],
  ])("allows %s (%s)", (address) => {
    expect(policy.allows(address)).toBe(true);
  });

  it.each([
    ["127.0.0.1", "loopback"],
    ["127.255.255.254", "loopback, all of 127/8"],
    ["10.0.0.1", "private 10/8"],
    ["172.16.0.1", "private 172.16/12"],
    ["172.31.255.255", "private 172.16/12"],
    ["192.168.1.1", "private 192.168/16"],
    ["169.254.169.254", "link-local: the cloud metadata service"],
    ["169.254.0.1", "link-local"],
    ["100.64.0.1", "CGNAT 100.64/10"],
    ["100.127.255.255", "CGNAT 100.64/10"],
    ["0.0.0.0", "unspecified"],
    ["0.1.2.3", "this network, 0/8"],
    ["255.255.255.255", "broadcast"],
    ["224.0.0.1", "multicast"],
    ["239.255.255.250", "multicast"],
    ["240.0.0.1", "reserved 240/4"],
    ["192.0.2.1", "documentation (reserved)"],
    ["198.18.0.1", "benchmarking (reserved)"],
    ["::1", "IPv6 loopback"],
    ["::", "IPv6 unspecified"],
    ["fe80::1", "IPv6 link-local"],
    ["fe80::1%eth0", "IPv6 link-local with a zone"],
    ["fc00::1", "unique-local fc00::/7"],
    ["fd12:3456::1", "unique-local fc00::/7"],
    ["ff02::1", "IPv6 multicast"],
    ["2001:db8::1", "IPv6 documentation"],
    ["::ffff:127.0.0.1", "IPv4-mapped loopback"],
    ["::ffff:7f00:1", "IPv4-mapped loopback, hex"],
    ["::ffff:169.254.169.254", "IPv4-mapped metadata address"],
    ["::ffff:10.0.0.1", "IPv4-mapped private"],
    ["::ffff:0:127.0.0.1", "IPv4-translated loopback"],
    ["64:ff9b::127.0.0.1", "NAT64 of loopback"],
    ["64:ff9b::a9fe:a9fe", "NAT64 of the metadata address"],
    ["64:ff9b:1::808:808", "local-use NAT64 (RFC 8215), whatever it carries"],
    ["2002:7f00:1::1", "6to4 of loopback"],
    ["2002:c0a8:101::1", "6to4 of 192.168.1.1"],
    ["2001:0:4136:e378::1", "Teredo"],
    ["::127.0.0.1", "IPv4-compatible (deprecated)"],
    ["[::1]", "a bracketed IPv6 loopback"],
    ["2130706433", "a decimal IPv4 (never what a resolver answers)"],
    ["0x7f000001", "a hex IPv4"],
    ["0177.0.0.1", "an octal IPv4"],
    ["127.1", "a shorthand IPv4"],
    ["localhost", "a name, not an address"],
    ["", "nothing"],
  ])("refuses %s (%s)", (address) => {
    expect(policy.allows(address)).toBe(false);
  });

  it("allows what an operator lists, in IPv4 and IPv6, and nothing next to it", () => {
    const operator = new AddressPolicy(parseNetworks("10.1.0.0/16, fd00:1::/32,127.0.0.1"));
    expect(operator.allows("10.1.2.3")).toBe(true);
    expect(operator.allows("10.2.0.1")).toBe(false);
    expect(operator.allows("fd00:1::5")).toBe(true);
    expect(operator.allows("fd00:2::5")).toBe(false);
    expect(operator.allows("127.0.0.1")).toBe(true);
    expect(operator.allows("127.0.0.2")).toBe(false);
    // The same IPv4 address written as IPv6 is the same host.
    expect(operator.allows("::ffff:127.0.0.1")).toBe(true);
    expect(operator.allows("::1")).toBe(false);
    expect(operator.allows("8.8.8.8")).toBe(true);
  });

  it("parses a network list into normalised CIDRs, and refuses what is not one", () => {
    expect(parseNetworks("")).toEqual([]);
    expect(parseNetworks(" 10.0.0.0/8 , ::1 ,127.0.0.1")).toEqual(["10.0.0.0/8", "::1/128", "127.0.0.1/32"]);
    expect(() => parseNetworks("10.0.0.0/8, intranet")).toThrow(/"intranet" is not an IP network/);
    expect(() => parseNetworks("10.0.0.0/33")).toThrow(/not an IP network/);
  });
});
