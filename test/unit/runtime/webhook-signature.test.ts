import { randomBytes } from "node:crypto";
import fc from "fast-check";
import { Webhook } from "standardwebhooks";
import { Webhook as SvixWebhook } from "svix";
import { describe, expect, it } from "vitest";
import { newWebhookSecret } from "../../../src/runtime/webhook-secrets.js";
import { WebhookSigner } from "../../../src/runtime/webhook-signature.js";

/**
 * The service signs with node:crypto's HMAC (docs/decisions/0050); the standard's own library
 * (`standardwebhooks`, and `svix`, which reads the same headers) is the judge of what it signs.
 */
describe("WebhookSigner", () => {
  it("signs exactly as the standard's library does, for any secret, id, instant and body", () => {
    fc.assert(
      fc.property(
        fc.uint8Array({ minLength: 24, maxLength: 64 }),
        fc.string({ minLength: 1, maxLength: 80 }),
        fc.date({
          min: new Date("1970-01-01T00:00:00Z"),
          max: new Date("2200-01-01T00:00:00Z"),
          noInvalidDate: true,
        }),
        fc.string({ unit: "grapheme", maxLength: 400 }),
        (key, id, at, body) => {
          const secret = `whsec_${Buffer.from(key).toString("base64")}`;
          expect(new WebhookSigner(secret).sign(id, at, body)).toBe(new Webhook(secret).sign(id, at, body));
        },
      ),
      { numRuns: 500 },
    );
  });

  it("signs what the standard's library and svix's verify, and nothing else", () => {
    const secret = newWebhookSecret();
    const at = new Date();
    const body = JSON.stringify({ type: "message.succeeded", data: { note: "non-ASCII: é, 😀" } });
    const headers = {
      "webhook-id": "evt_1",
      "webhook-timestamp": String(Math.floor(at.getTime() / 1000)),
      "webhook-signature": new WebhookSigner(secret).sign("evt_1", at, body),
    };
    expect(new Webhook(secret).verify(body, headers)).toEqual(JSON.parse(body));
    expect(new SvixWebhook(secret).verify(body, headers)).toEqual(JSON.parse(body));
    const other = newWebhookSecret();
    expect(() => new Webhook(other).verify(body, headers)).toThrow();
    expect(() => new Webhook(secret).verify(`${body} `, headers)).toThrow();
  });

  it("takes a secret without its prefix, as the standard's library does", () => {
    const key = randomBytes(32).toString("base64");
    const at = new Date();
    expect(new WebhookSigner(key).sign("evt_2", at, "{}")).toBe(
      new Webhook(`whsec_${key}`).sign("evt_2", at, "{}"),
    );
  });

  it("refuses what is not the base64 of a key, which Node's decoder would partly skip", () => {
    for (const bad of ["whsec_", "whsec_not base64!", "whsec_****", ""]) {
      expect(() => new WebhookSigner(bad)).toThrow(/whsec_ followed by the base64/);
    }
  });
});
