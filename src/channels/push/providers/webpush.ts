import { createECDH, ECDH } from "node:crypto";
import webpush, { type RequestDetails } from "web-push";
import type { DeliveryError, DeliveryOutcome } from "../../../domain/delivery-outcome.js";
import { classifyFetchError, httpStatusError } from "../../providers/http.js";
import { cleanMessage, failedOutcome, redact, truncate } from "../../providers/redact.js";
import type { PushMessage, PushProvider, PushSubscription } from "./provider.js";

export interface WebPushProviderOptions {
  /** The application server's P-256 public key, base64url (65 bytes uncompressed). */
  vapidPublicKey: string;
  /** Its private key, base64url (32 bytes). */
  vapidPrivateKey: string;
  /** A `mailto:` or `https:` URL push services can use to contact the sender. */
  vapidSubject: string;
  /** Covers the whole exchange, response body included. */
  timeoutMs: number;
  /** Injected for tests; defaults to the global `fetch`. */
  fetch?: typeof fetch;
}

const MAX_BODY_EXCERPT = 200;

/**
 * Sends Web Push messages (RFC 8030) with VAPID (RFC 8292) and aes128gcm payload encryption
 * (RFC 8291). web-push builds the request; it is sent with `fetch` because web-push's own
 * `sendNotification` speaks only https and has no whole-exchange time-out. Every answer is
 * mapped onto a {@link DeliveryOutcome}: 404/410 mean the subscription is gone (`rejected`).
 */
export class WebPushProvider implements PushProvider {
  readonly name = "webpush";
  readonly #vapid: { subject: string; publicKey: string; privateKey: string };
  readonly timeoutMs: number;
  readonly #fetch: typeof fetch;

  /** Throws if the VAPID keys or subject are unusable, so a bad key stops start-up, not every send. */
  constructor(options: WebPushProviderOptions) {
    this.#vapid = {
      subject: options.vapidSubject,
      publicKey: options.vapidPublicKey,
      privateKey: options.vapidPrivateKey,
    };
    validateVapid(this.#vapid);
    this.timeoutMs = options.timeoutMs;
    this.#fetch = options.fetch ?? ((input, init) => fetch(input, init));
  }

  async send(message: PushMessage): Promise<DeliveryOutcome> {
    const invalid = subscriptionProblem(message.subscription);
    if (invalid) return this.#failure({ class: "rejected", code: "invalid_subscription", message: invalid });

    let request: RequestDetails;
    try {
      request = webpush.generateRequestDetails(message.subscription, message.payload, {
        TTL: message.ttlSeconds,
        urgency: message.urgency,
        // One topic per message: a retry replaces an earlier attempt the push service still holds
        // for an offline device, instead of queueing a second copy (RFC 8030 §5.4).
        topic: message.messageId.replaceAll("-", "").slice(0, 32),
        contentEncoding: "aes128gcm",
        vapidDetails: this.#vapid,
      });
    } catch (err) {
      return this.#failure({
        class: "permanent",
        code: "invalid_request",
        message: `Could not build the push request: ${err instanceof Error ? err.message : String(err)}`,
      });
    }

    const host = new URL(request.endpoint).host;
    // "vapid t=<token>, k=<public key>": neither the header nor the token may reach a message.
    const authorization = request.headers.Authorization ?? "";
    const secrets = [authorization, /\bt=([^,\s]+)/.exec(authorization)?.[1] ?? ""];
    try {
      return await this.#post(message, request, host, secrets);
    } catch (err) {
      return this.#failure(classifyFetchError(err, `push service ${host}`, this.timeoutMs), secrets);
    }
  }

  async #post(
    message: PushMessage,
    request: RequestDetails,
    host: string,
    secrets: string[],
  ): Promise<DeliveryOutcome> {
    const response = await this.#fetch(request.endpoint, {
      method: "POST",
      headers: fetchHeaders(request.headers),
      body: request.body,
      // The VAPID token is bound to the endpoint's origin, so a redirect cannot succeed, and
      // following it would hand the token and the payload to another host.
      redirect: "manual",
      signal: AbortSignal.timeout(this.timeoutMs),
    });
    // Read inside the same time-out: a service that sends headers then stalls is still stalled.
    const text = await response.text();

    if (response.ok) {
      const location = response.headers.get("location");
      return {
        ok: true,
        provider: this.name,
        // Push services name the message they accepted in Location; without one, the id only
        // needs to be stable for this attempt.
        providerMessageId: location || `webpush:${message.messageId}:${message.attempt}`,
      };
    }
    // Redacted before the excerpt is cut, or a cut secret would no longer match and leak in part.
    const excerpt = bodyExcerpt(redact(text, [this.#vapid.privateKey, ...secrets]));
    return this.#failure(classifyErrorResponse(response, excerpt, host), secrets);
  }

  #failure(error: DeliveryError, secrets: string[] = []): DeliveryOutcome {
    return failedOutcome(this.name, error, [this.#vapid.privateKey, ...secrets]);
  }
}

/**
 * Uses web-push's own checks (its `getVapidHeaders` validates the subject and both keys and
 * signs once), then checks the keys are a pair: a mismatched pair would pass web-push yet be
 * refused by every push service.
 */
function validateVapid(vapid: { subject: string; publicKey: string; privateKey: string }): void {
  try {
    webpush.getVapidHeaders(
      "https://push.example",
      vapid.subject,
      vapid.publicKey,
      vapid.privateKey,
      "aes128gcm",
    );
    const ecdh = createECDH("prime256v1");
    ecdh.setPrivateKey(Buffer.from(vapid.privateKey, "base64url"));
    if (!ecdh.getPublicKey().equals(Buffer.from(vapid.publicKey, "base64url"))) {
      throw new Error("the VAPID public key does not belong to the VAPID private key");
    }
  } catch (err) {
    const reason = err instanceof Error ? err.message : String(err);
    throw new Error(
      `WebPushProvider: invalid VAPID configuration: ${cleanMessage(reason, [vapid.privateKey])}`,
    );
  }
}

/**
 * A subscription that can never be encrypted to or reached is the recipient's fault, like an
 * invalid phone number, so it is `rejected` rather than blamed on the request.
 */
function subscriptionProblem(subscription: PushSubscription): string | undefined {
  let endpoint: URL;
  try {
    endpoint = new URL(subscription.endpoint);
  } catch {
    return "The subscription endpoint is not a URL";
  }
  if (endpoint.protocol !== "https:" && endpoint.protocol !== "http:") {
    return `The subscription endpoint uses ${endpoint.protocol}, not https:`;
  }
  try {
    ECDH.convertKey(Buffer.from(subscription.keys.p256dh, "base64url"), "prime256v1");
  } catch {
    return "The subscription's p256dh key is not a P-256 public key";
  }
  if (Buffer.from(subscription.keys.auth, "base64url").length < 16) {
    return "The subscription's auth secret is shorter than 16 bytes";
  }
  return undefined;
}

/** `fetch` computes Content-Length from the body itself and wants every header as text. */
function fetchHeaders(headers: Record<string, string | number>): Record<string, string> {
  return Object.fromEntries(
    Object.entries(headers)
      .filter(([name]) => name.toLowerCase() !== "content-length")
      .map(([name, value]) => [name, String(value)]),
  );
}

function classifyErrorResponse(response: Response, excerpt: string, host: string): DeliveryError {
  const status = response.status;
  const message = `Push service ${host} answered HTTP ${status}${excerpt ? `: ${excerpt}` : ""}`;

  if (status === 404 || status === 410) {
    // RFC 8030 §7.3: the subscription expired or the user unsubscribed; it will never work again.
    return { class: "rejected", code: "subscription_gone", message };
  }
  // 413 is permanent like 400, 401 and 403 (a bad VAPID token or request): resending cannot help.
  const code = status === 429 ? "rate_limited" : status === 413 ? "payload_too_large" : `http_${status}`;
  return httpStatusError(response, code, message);
}

function bodyExcerpt(text: string): string {
  // biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what is removed
  return truncate(text.replace(/[\u0000-\u001f\u007f\s]+/g, " ").trim(), MAX_BODY_EXCERPT);
}
