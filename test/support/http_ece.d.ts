/** The part of http_ece 1.2 (a CommonJS module without types) the test push service uses. */
declare module "http_ece" {
  import type { ECDH } from "node:crypto";

  namespace ece {
    interface Params {
      /** Default "aes128gcm", whose header carries the salt, record size and sender's key. */
      version?: "aes128gcm" | "aesgcm";
      /** The receiver's key pair (decrypting) or the sender's (encrypting). */
      privateKey?: ECDH;
      /** The other side's public key; for aes128gcm decryption it is read from the header. */
      dh?: string | Buffer;
      /** The subscription's auth secret, base64url or bytes. */
      authSecret?: string | Buffer;
      salt?: string | Buffer;
      rs?: number;
    }
    function decrypt(buffer: Buffer, params: Params): Buffer;
    function encrypt(buffer: Buffer, params: Params): Buffer;
  }
  export = ece;
}
