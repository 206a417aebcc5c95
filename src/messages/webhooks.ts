import type { Executor } from "../../db/client.js";
import {
  MAX_WEBHOOK_ENDPOINTS_PER_ORGANIZATION,
  PREVIOUS_SECRET_LIFETIME_MS,
  WEBHOOK_RECOVER_MAX_EVENTS,
  WEBHOOK_RECOVER_MESSAGE_LOOKBACK_MS,
  WEBHOOK_TEST_EVENT,
  webhookTestBody,
} from "../domain/webhooks.js";
import { UnreadableContentError } from "../runtime/content-crypto.js";
import {
  type AbortRequest,
  isOutboundAddressError,
  type OutboundPost,
} from "../runtime/outbound/outbound-fetch.js";
import { newWebhookSecret, type WebhookSecrets } from "../runtime/webhook-secrets.js";
import { WebhookSigner } from "../runtime/webhook-signature.js";
import {
  countWebhookEndpoints,
  insertWebhookAttempt,
  insertWebhookEndpoint,
  type Recovery,
  recoverWebhookDeliveries,
  rotateWebhookEndpointSecret,
  type StoredWebhookEndpoint,
  type WebhookAttempt,
} from "../store/webhooks.js";

/** Use cases of an organization's status webhook endpoints (docs/decisions/0035). */

export interface WebhookDeps {
  db: Executor;
  now: () => Date;
  newId: () => string;
  secrets: WebhookSecrets;
  /** POST through the outbound guard, never following a redirect (outboundPost). */
  post: OutboundPost;
}

export type EndpointCreation =
  | { outcome: "created"; endpoint: StoredWebhookEndpoint; secret: string }
  | { outcome: "full" };

/**
 * Creates an endpoint with a new secret, unless the organization has
 * {@link MAX_WEBHOOK_ENDPOINTS_PER_ORGANIZATION} already (creations at the same instant may pass
 * the cap by as many as are in flight: it bounds a list, it is no quota).
 */
export async function createWebhookEndpoint(
  deps: Omit<WebhookDeps, "post">,
  organizationId: string,
  fields: { url: string; eventTypes: string[] | null; description: string | null; enabled: boolean },
): Promise<EndpointCreation> {
  if ((await countWebhookEndpoints(deps.db, organizationId)) >= MAX_WEBHOOK_ENDPOINTS_PER_ORGANIZATION) {
    return { outcome: "full" };
  }
  const id = deps.newId();
  const secret = newWebhookSecret();
  const now = deps.now();
  const endpoint = await insertWebhookEndpoint(deps.db, {
    id,
    organizationId,
    ...fields,
    disabledReason: null,
    secretSealed: deps.secrets.seal(id, secret),
    previousSecretSealed: null,
    previousSecretExpiresAt: null,
    failingSince: null,
    createdAt: now,
    updatedAt: now,
  });
  return { outcome: "created", endpoint, secret };
}

/**
 * Gives the endpoint a new secret; the one it replaces keeps signing beside it for
 * {@link PREVIOUS_SECRET_LIFETIME_MS}. Undefined when the organization has no such endpoint.
 */
export async function rotateWebhookSecret(
  deps: Omit<WebhookDeps, "post">,
  endpoint: StoredWebhookEndpoint,
): Promise<{ endpoint: StoredWebhookEndpoint; secret: string } | undefined> {
  const secret = newWebhookSecret();
  const now = deps.now();
  const updated = await rotateWebhookEndpointSecret(deps.db, endpoint.organizationId, endpoint.id, {
    secretSealed: deps.secrets.seal(endpoint.id, secret),
    previousSecretExpiresAt: new Date(now.getTime() + PREVIOUS_SECRET_LIFETIME_MS),
    updatedAt: now,
  });
  return updated && { endpoint: updated, secret };
}

/** What of an endpoint its secrets are read from. */
export type EndpointSecrets = Pick<
  StoredWebhookEndpoint,
  "id" | "secretSealed" | "previousSecretSealed" | "previousSecretExpiresAt"
>;

/**
 * An endpoint's secrets, opened, each as its signer (one per secret, kept with the opened secrets:
 * its constructor decodes the key): its own, and the one it replaced while that still signs.
 */
export interface OpenedSecrets {
  current: WebhookSigner;
  previous?: { signer: WebhookSigner; expiresAt: Date };
}

/**
 * Opens the endpoint's secrets (AES-GCM, so a dispatcher does it once per endpoint and keeps the
 * result while the endpoint's `updated_at` stays the same). A previous secret that no longer opens
 * (sealed under a `WEBHOOK_SECRET_KEY` since changed) is left out: the current one still signs.
 */
export function openEndpointSecrets(secrets: WebhookSecrets, endpoint: EndpointSecrets): OpenedSecrets {
  const current = new WebhookSigner(secrets.open(endpoint.id, endpoint.secretSealed));
  const previous =
    endpoint.previousSecretSealed && endpoint.previousSecretExpiresAt
      ? openOrSkip(secrets, endpoint.id, endpoint.previousSecretSealed)
      : undefined;
  return previous && endpoint.previousSecretExpiresAt
    ? {
        current,
        previous: { signer: new WebhookSigner(previous), expiresAt: endpoint.previousSecretExpiresAt },
      }
    : { current };
}

/** The signers at `now`: the current secret's, and the previous one's for 24 h after a rotation. */
export function signersAt(opened: OpenedSecrets, now: Date): WebhookSigner[] {
  return opened.previous && opened.previous.expiresAt > now
    ? [opened.current, opened.previous.signer]
    : [opened.current];
}

/** The signers for the endpoint now (see {@link openEndpointSecrets}). */
export function endpointSigners(
  secrets: WebhookSecrets,
  endpoint: EndpointSecrets,
  now: Date,
): WebhookSigner[] {
  return signersAt(openEndpointSecrets(secrets, endpoint), now);
}

function openOrSkip(secrets: WebhookSecrets, endpointId: string, sealed: Buffer): string | undefined {
  try {
    return secrets.open(endpointId, sealed);
  } catch (error) {
    if (error instanceof UnreadableContentError) return undefined;
    throw error;
  }
}

/**
 * The Standard Webhooks headers of one attempt: `webhook-signature` holds one `v1,<base64>` per
 * secret, space-separated (the standard's way of signing with two secrets during a rotation).
 */
export function webhookHeaders(
  signers: readonly WebhookSigner[],
  eventId: string,
  at: Date,
  body: string,
): Record<string, string> {
  return {
    "content-type": "application/json",
    "webhook-id": eventId,
    "webhook-timestamp": String(Math.floor(at.getTime() / 1000)),
    "webhook-signature": signers.map((signer) => signer.sign(eventId, at, body)).join(" "),
  };
}

/** What became of one POST: null error on a 2xx. */
export interface AttemptOutcome {
  statusCode: number | null;
  errorClass: "http" | "redirect" | "timeout" | "connection" | "address_refused" | null;
  errorCode: string | null;
}

/** Undici's errors of a deadline: connecting, waiting for the headers, for the body. */
const UNDICI_TIMEOUTS = new Set([
  "UND_ERR_CONNECT_TIMEOUT",
  "UND_ERR_HEADERS_TIMEOUT",
  "UND_ERR_BODY_TIMEOUT",
]);

/** Classifies what the POST answered or threw (`outboundPost`'s errors, or `fetch`'s). */
export function attemptOutcome(result: { status: number } | { error: unknown }): AttemptOutcome {
  if ("status" in result) {
    const { status } = result;
    if (status >= 200 && status < 300) return { statusCode: status, errorClass: null, errorCode: null };
    // Redirects are never followed: where a 3xx points is not the endpoint.
    const errorClass = status >= 300 && status < 400 ? "redirect" : "http";
    return { statusCode: status, errorClass, errorCode: `http_${status}` };
  }
  const { error } = result;
  if (isOutboundAddressError(error)) {
    return { statusCode: null, errorClass: "address_refused", errorCode: "ERR_OUTBOUND_ADDRESS_REFUSED" };
  }
  const own = error instanceof Error ? (error as { code?: unknown }).code : undefined;
  if (
    error instanceof Error &&
    (error.name === "TimeoutError" ||
      error.name === "AbortError" ||
      (typeof own === "string" && UNDICI_TIMEOUTS.has(own)))
  ) {
    return { statusCode: null, errorClass: "timeout", errorCode: "ETIMEDOUT" };
  }
  const cause = error instanceof Error ? (error.cause as { code?: unknown } | undefined) : undefined;
  const code =
    typeof own === "string" ? own : typeof cause?.code === "string" ? cause.code : "ERR_CONNECTION";
  return { statusCode: null, errorClass: "connection", errorCode: code };
}

/** One attempt as it went: what came of it, when it started and how long it took. */
export interface SentWebhook {
  outcome: AttemptOutcome;
  /** The answer's `Retry-After` header (429 and 503 honour it), if any. */
  retryAfter: string | null;
  attemptedAt: Date;
  durationMs: number;
}

/**
 * POSTs one event to `url`, signed by `signers` at `at`, within `timeoutMs` in all (or until the
 * request is aborted through `cancellable`, see `PostOptions`), never following a redirect
 * (`post` is the outbound guard's), and classifies what came of it. The answer's body is dropped.
 * Records nothing: the test event records its attempt at once, the dispatcher many at a time.
 */
export async function sendWebhook(
  post: OutboundPost,
  url: string,
  signers: readonly WebhookSigner[],
  event: { id: string; body: string },
  at: Date,
  timeoutMs: number,
  cancellable?: (abort: AbortRequest) => () => void,
): Promise<SentWebhook> {
  const headers = webhookHeaders(signers, event.id, at, event.body);
  const started = performance.now();
  let outcome: AttemptOutcome;
  let retryAfter: string | null = null;
  try {
    const answer = await post(url, { headers, body: event.body, timeoutMs, cancellable });
    outcome = attemptOutcome({ status: answer.status });
    retryAfter = answer.retryAfter;
  } catch (error) {
    outcome = attemptOutcome({ error });
  }
  return { outcome, retryAfter, attemptedAt: at, durationMs: Math.round(performance.now() - started) };
}

/** POSTs one event to the endpoint now, signed (see {@link sendWebhook}), and records the attempt. */
export async function deliverWebhookEvent(
  deps: WebhookDeps,
  endpoint: StoredWebhookEndpoint,
  event: { id: string; type: string; body: string },
  timeoutMs: number,
): Promise<WebhookAttempt> {
  const at = deps.now();
  const sent = await sendWebhook(
    deps.post,
    endpoint.url,
    endpointSigners(deps.secrets, endpoint, at),
    event,
    at,
    timeoutMs,
  );
  return insertWebhookAttempt(deps.db, {
    id: deps.newId(),
    endpointId: endpoint.id,
    organizationId: endpoint.organizationId,
    eventId: event.id,
    eventType: event.type,
    attemptedAt: at,
    durationMs: sent.durationMs,
    ...sent.outcome,
    nextRetryAt: null,
    gaveUp: false,
  });
}

/** Sends a `webhook.test` event to the endpoint now (enabled or not), once, and records the attempt. */
export async function sendTestEvent(
  deps: WebhookDeps,
  endpoint: StoredWebhookEndpoint,
  timeoutMs: number,
): Promise<WebhookAttempt> {
  const id = deps.newId();
  const body = JSON.stringify(webhookTestBody(endpoint, deps.now()));
  return deliverWebhookEvent(deps, endpoint, { id, type: WEBHOOK_TEST_EVENT, body }, timeoutMs);
}

export type RecoverOutcome = { outcome: "disabled" } | ({ outcome: "recovered" } & Recovery);

/**
 * Re-sends the endpoint's events since `since` (checked by `recoverSinceProblem`): every event of
 * its organization's messages that it subscribes to now, in order, as deliveries due at once, at
 * most `limit` of them (see `Recovery.nextSince` for the rest). A disabled endpoint recovers
 * nothing: it is enabled first (its deliveries would otherwise wait on it, unsent).
 */
export async function recoverWebhookEvents(
  deps: Pick<WebhookDeps, "db">,
  endpoint: StoredWebhookEndpoint,
  since: Date,
  limit: number = WEBHOOK_RECOVER_MAX_EVENTS,
): Promise<RecoverOutcome> {
  if (!endpoint.enabled) return { outcome: "disabled" };
  const recovery = await recoverWebhookDeliveries(deps.db, {
    organizationId: endpoint.organizationId,
    endpointId: endpoint.id,
    since,
    messagesCreatedSince: new Date(since.getTime() - WEBHOOK_RECOVER_MESSAGE_LOOKBACK_MS),
    limit,
  });
  return { outcome: "recovered", ...recovery };
}
