import type { Prepared } from "../src/channels/channel.js";
import type { SendOptions } from "../src/channels/providers/provider.js";
import type { DeliveryOutcome } from "../src/domain/delivery-outcome.js";
import { type MessageContent, NO_PROVIDER } from "../src/domain/events.js";
import type { Metrics } from "../src/observability/metrics.js";
import type { Logger } from "../src/runtime/logger.js";

/** The delivery processor's (./deliver.ts) call of a provider: made safe, logged and counted. */

/**
 * What the provider said goes to the log, never to an event (tenants read those): a failure at
 * info (warn when permanent: a configuration to fix), with its class and code and the provider's
 * own words (its reply, which address failed), already cleaned of secrets by the provider; a
 * success's detail (the push service's Location) at debug.
 */
export function logOutcome(
  logger: Logger,
  messageId: string,
  attempt: number,
  outcome: DeliveryOutcome,
): void {
  for (const failover of outcome.failovers ?? []) {
    const { provider, error, detail } = failover;
    const fields = { messageId, attempt, provider, class: error.class, code: error.code, detail };
    // A permanent error moved on is an account's refusal (credentials, a sender not its own): a
    // configuration to fix, as a single provider's permanent failure is.
    if (error.class === "permanent")
      logger.warn(fields, "provider account refused the message: attempt moved to the next provider");
    else logger.info(fields, "provider did not take the message: attempt moved to the next provider");
  }
  if (outcome.ok) {
    if (outcome.detail)
      logger.debug({ messageId, attempt, provider: outcome.provider, detail: outcome.detail }, "delivered");
    return;
  }
  const { error } = outcome;
  const fields = {
    messageId,
    attempt,
    provider: outcome.provider,
    class: error.class,
    code: error.code,
    detail: outcome.detail,
  };
  if (error.class === "permanent") logger.warn(fields, "delivery attempt failed");
  else logger.info(fields, "delivery attempt failed");
}

/**
 * A provider must not throw; if one does anyway, that is a transient failure, not a crash. The
 * exception's text is the detail, for the log.
 */
export async function sendSafely(
  prepared: Extract<Prepared, { ready: true }>,
  attempt: number,
  options: SendOptions,
): Promise<DeliveryOutcome> {
  try {
    return await prepared.send(attempt, options);
  } catch (error) {
    return {
      ok: false,
      provider: prepared.provider,
      error: { class: "transient", code: "provider_exception", message: "The provider failed unexpectedly" },
      detail: error instanceof Error ? error.message : String(error),
    };
  }
}

/** Counts each provider's failure of the attempt: the providers it left first, and its last one. */
export function countProviderErrors(
  metrics: Pick<Metrics, "providerError"> | undefined,
  message: MessageContent,
  outcome: DeliveryOutcome,
): void {
  for (const { provider, error } of outcome.failovers ?? [])
    metrics?.providerError(message.channel, provider, error.class);
  if (!outcome.ok && outcome.provider !== NO_PROVIDER)
    metrics?.providerError(message.channel, outcome.provider, outcome.error.class);
}
