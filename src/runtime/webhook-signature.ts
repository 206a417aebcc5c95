import { createHmac } from "node:crypto";
import { SECRET_PREFIX } from "./webhook-secrets.js";

/**
 * Signs status webhooks per Standard Webhooks 1.0 (docs/decisions/0050): `v1,` + the base64 of
 * HMAC-SHA256, keyed by the secret's bytes (`whsec_` + base64), of `<webhook-id>.<unix
 * seconds>.<body>`. The HMAC is node:crypto's (OpenSSL), not the `standardwebhooks` package's own
 * `sign`, whose pure-JavaScript SHA-256 costs the dispatcher six times as much CPU a delivery;
 * tests hold the two to the same signature for any secret, id, instant and body
 * (test/unit/runtime/webhook-signature.test.ts), and verify every delivery with `standardwebhooks`
 * and `svix`.
 */
export class WebhookSigner {
  readonly #key: Buffer;

  /** `secret`: `whsec_` + base64 of the key's bytes (the prefix may be left out, as the standard's library allows). */
  constructor(secret: string) {
    const encoded = secret.startsWith(SECRET_PREFIX) ? secret.slice(SECRET_PREFIX.length) : secret;
    const key = Buffer.from(encoded, "base64");
    // Node's decoder skips what is not base64 where the standard's library refuses it: a secret
    // is its exact encoding (padding aside), or it is not one.
    if (key.length === 0 || key.toString("base64").replace(/=+$/, "") !== encoded.replace(/=+$/, "")) {
      throw new Error("a webhook secret is whsec_ followed by the base64 of its bytes");
    }
    this.#key = key;
  }

  /** The `webhook-signature` entry of one attempt: `v1,<base64>`. */
  sign(eventId: string, at: Date, body: string): string {
    const seconds = Math.floor(at.getTime() / 1000);
    return `v1,${createHmac("sha256", this.#key).update(`${eventId}.${seconds}.${body}`).digest("base64")}`;
  }
}
