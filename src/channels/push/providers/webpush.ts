import { createECDH, ECDH } from "node:crypto";
import webpush, { type RequestDetails } from "web-push";
import type { DeliveryError, DeliveryOutcome } from "../../../domain/delivery-outcome.js";
import {
  createOutboundAgent,
  outboundFetch,
  type Resolve,
} from "../../../runtime/outbound/outbound-fetch.js";
import { classifyFetchError, httpStatusError } from "../../providers/http.js";
import { cleanMessage, failedOutcome, redactRecipients } from "../../providers/redact.js";
import { hostAllowed } from "../request.js";
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
  /**
   * The hosts an endpoint may point at (`PUSH_ENDPOINT_HOSTS`; null: any), checked again at send
   * time: the API checked them when the message was accepted, under the settings of then.
   */
  allowedHosts: readonly string[] | null;
  /** Networks besides public addresses a push service may be at (`OUTBOUND_ALLOWED_NETWORKS`). */
  allowedNetworks?: readonly string[];
  /** How endpoint host names resolve; injected in tests, defaults to the system resolver. */
  resolve?: Resolve;
  /**
   * Injected for tests only: it replaces the guarded fetch, and with it the address checks made
   * at connect time. Defaults to `fetch` through the outbound guard.
   */
  fetch?: typeof fetch;
}

/** Our words for the other side in the messages tenants read (never its host or address). */
const WHO = "the push service";

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
  readonly #allowedHosts: readonly string[] | null;
  readonly #fetch: typeof fetch;
  readonly #close: () => Promise<void>;

  /** Throws if the VAPID keys or subject are unusable, so a bad key stops start-up, not every send. */
  constructor(options: WebPushProviderOptions) {
    this.#vapid = {
      subject: options.vapidSubject,
      publicKey: options.vapidPublicKey,
      privateKey: options.vapidPrivateKey,
    };
    validateVapid(this.#vapid);
    this.timeoutMs = options.timeoutMs;
    this.#allowedHosts = options.allowedHosts;
    if (options.fetch) {
      this.#fetch = options.fetch;
      this.#close = async () => {};
    } else {
      const agent = createOutboundAgent({
        allowedNetworks: options.allowedNetworks,
        resolve: options.resolve,
      });
      this.#fetch = outboundFetch(agent);
      this.#close = () => agent.close();
    }
  }

  /** Closes the pooled connections to push services. */
  async close(): Promise<void> {
    await this.#close();
  }

  async send(message: PushMessage): Promise<DeliveryOutcome> {
    const invalid = subscriptionProblem(message.subscription);
    if (invalid) return this.#failure({ class: "rejected", code: "invalid_subscription", message: invalid });
    if (!hostAllowed(new URL(message.subscription.endpoint), this.#allowedHosts)) {
      return this.#failure(
        {
          class: "rejected",
          code: "endpoint_not_allowed",
          message: "Not sent: the subscription's push service is not one PUSH_ENDPOINT_HOSTS allows",
        },
        [],
        `endpoint host ${new URL(message.subscription.endpoint).host} is not in PUSH_ENDPOINT_HOSTS`,
      );
    }

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
      return this.#failure(
        { class: "permanent", code: "invalid_request", message: "Could not build the push request" },
        [],
        err instanceof Error ? err.message : String(err),
      );
    }

    const host = new URL(request.endpoint).host;
    // "vapid t=<token>, k=<public key>": neither the header nor the token may reach a message or a log.
    const authorization = request.headers.Authorization ?? "";
    const secrets = [authorization, /\bt=([^,\s]+)/.exec(authorization)?.[1] ?? ""];
    try {
      return await this.#post(message, request, host, secrets);
    } catch (err) {
      const { error, detail } = classifyFetchError(err, WHO, this.timeoutMs);
      return this.#failure(error, secrets, `push service ${host}: ${detail}`);
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
      // following it would hand the token and the payload to another host (a 3xx is a failure).
      redirect: "manual",
      signal: AbortSignal.timeout(this.timeoutMs),
    });
    // Read inside the same time-out: a service that sends headers then stalls is still stalled.
    const text = await response.text();

    if (response.ok) {
      // Push services name the message they accepted in Location, a URL of their choosing: it
      // goes to the log, and the id recorded is ours, stable for the message and attempt.
      const location = response.headers.get("location");
      return {
        ok: true,
        provider: this.name,
        providerMessageId: `webpush:${message.messageId}:${message.attempt}`,
        ...(location ? { detail: `push service ${host} accepted it as ${location}` } : {}),
      };
    }
    return this.#failure(
      classifyErrorResponse(response),
      secrets,
      // A service may echo the subscription (its endpoint is the recipient, its keys its secrets).
      `push service ${host} answered HTTP ${response.status}${text ? `: ${redactRecipients(text, recipientOf(message))}` : ""}`,
    );
  }

  /** A failure, its message and its detail cleaned of the private key and of `secrets`. */
  #failure(error: DeliveryError, secrets: string[] = [], detail?: string): DeliveryOutcome {
    return failedOutcome(this.name, error, [this.#vapid.privateKey, ...secrets], detail);
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

/** What an HTTP error answer means; the message is ours, quoting nothing of the answer. */
function classifyErrorResponse(response: Response): DeliveryError {
  const status = response.status;
  const message = `The push service answered HTTP ${status}`;

  if (status === 404 || status === 410) {
    // RFC 8030 §7.3: the subscription expired or the user unsubscribed; it will never work again.
    return { class: "rejected", code: "subscription_gone", message };
  }
  // 413 is permanent like 400, 401 and 403 (a bad VAPID token or request): resending cannot help.
  const code = status === 429 ? "rate_limited" : status === 413 ? "payload_too_large" : `http_${status}`;
  return httpStatusError(response, code, message);
}

/** What identifies the recipient of a push: the subscription's endpoint and keys. */
function recipientOf(message: PushMessage): string[] {
  const { endpoint, keys } = message.subscription;
  return [endpoint, new URL(endpoint).pathname, keys.p256dh, keys.auth].filter((part) => part.length > 8);
}
