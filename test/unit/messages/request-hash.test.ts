import { describe, expect, it } from "vitest";
import { requestHash } from "../../../src/messages/accept.js";

/**
 * The hash an `Idempotency-Key` holds must not change across an upgrade, or a client's retry of a
 * request accepted before it would get a 422. These values were computed by the code before SMS
 * segments were counted (docs/decisions/0043).
 */
describe("requestHash", () => {
  it("given an SMS with its segments and encoding, then the hash is the one from before they were counted", () => {
    const hash = requestHash({
      content: {
        channel: "sms",
        recipient: "+14155550100",
        sender: "ACME",
        body: "Your code is 123456",
        segments: 1,
        encoding: "GSM-7",
      },
      retryEnabled: true,
      notificationType: "OTP",
    });
    expect(hash).toBe("a56192e3c0d27d140874972616dfd07aed839b6e04b3ba62c700e39588e20085");
  });

  it("given an e-mail (nothing measured), then the hash is unchanged too", () => {
    const hash = requestHash({
      content: {
        channel: "email",
        recipient: "a@b.test",
        sender: "x@acme.test",
        email: { template_name: "t", message: { to: [{ email: "a@b.test" }], subject: "Hi" } },
      } as never,
      retryEnabled: false,
      notificationType: undefined,
    });
    expect(hash).toBe("7c838056bd50a4a2f8987ff4fdcbcc212c17edb11aeda58ead201de732ec569e");
  });

  it("given the same body counted differently, then the hash is the same: the body decides", () => {
    const request = (segments: number) =>
      requestHash({
        content: { channel: "sms", recipient: "+1", sender: "A", body: "b", segments, encoding: "GSM-7" },
        retryEnabled: true,
        notificationType: undefined,
      });
    expect(request(1)).toBe(request(2));
  });
});
