import { Hono } from "hono";
import {
  formParams,
  TWILIO_SMS_CALLBACK_PATH,
  twilioCallback,
  twilioStatusCallbackUrl,
  verifyTwilioSignature,
} from "../../../channels/sms/receipts/twilio.js";
import { errorResponse } from "../../../http/errors.js";
import { recordReceipt } from "../../../messages/receipts.js";
import { twilioAccounts, twilioAccountsOf } from "../../../runtime/provider-accounts.js";
import { bodyLimit } from "../../register-routes.js";
import type { AppDeps, AppEnv } from "../../types.js";

/**
 * Twilio's SMS status callbacks (docs/decisions/0038): public (no API key; Twilio's signature is
 * the authentication), outside the OpenAPI document (only Twilio calls it). The parsing, the
 * signature and the mapping are the SMS channel's (src/channels/sms/receipts/twilio.ts).
 *
 * Not rate-limited: it is cheap before the signature is checked (a body of at most
 * {@link MAX_CALLBACK_BYTES} and one HMAC-SHA1; nothing is read from the database), and after it
 * only Twilio gets through.
 */

/** Twilio's callbacks are a few hundred bytes of form fields. */
export const MAX_CALLBACK_BYTES = 16 * 1024;

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export function twilioSmsCallbacks(deps: AppDeps): Hono<AppEnv> {
  const app = new Hono<AppEnv>();
  const { config, logger, metrics } = deps;
  // The Twilio accounts messages go through (`twilio`, or a provider list's `twilio:backup` …):
  // each callback is verified with the token of the account that took its message (decision 0046).
  const accounts = twilioAccounts(config);
  const accountNames = accounts.map((account) => account.name);
  // Before the account that took a message is known, only those of its organization's list speak for it.
  const ofOrganization = twilioAccountsOf(config);
  app.post(`${TWILIO_SMS_CALLBACK_PATH}/:messageId`, bodyLimit(MAX_CALLBACK_BYTES), async (c) => {
    const publicBaseUrl = config.PUBLIC_BASE_URL;
    // Without Twilio or a public address no callback was ever asked for: the route is not there.
    if (accounts.length === 0 || !publicBaseUrl)
      return errorResponse(c, 404, `No route for POST ${c.req.path}`);
    const count = (outcome: string) => metrics.receipt("twilio", outcome);
    const messageId = c.req.param("messageId");
    const contentType = c.req.header("content-type") ?? "";
    if (!/^application\/x-www-form-urlencoded\s*(;|$)/i.test(contentType))
      return errorResponse(c, 415, "Content-Type must be application/x-www-form-urlencoded");
    const params = formParams(await c.req.text());
    // The URL we gave Twilio, from PUBLIC_BASE_URL: never this request's Host or X-Forwarded-*.
    const url = twilioStatusCallbackUrl(publicBaseUrl, messageId);
    const signature = c.req.header("x-twilio-signature");
    // Every account's token is tried (one HMAC each, no database read before one matches); which
    // account it must be is known once the message is read.
    const authenticated = accounts
      .filter(({ authToken }) => verifyTwilioSignature(authToken, url, params, signature))
      .map(({ name }) => name);
    const refuse = () => {
      count("bad_signature");
      logger.warn(
        { messageId: messageId.slice(0, 64) },
        "Twilio status callback with a missing or wrong signature",
      );
      return errorResponse(c, 403, "X-Twilio-Signature is missing or wrong");
    };
    if (authenticated.length === 0) return refuse();
    const callback = twilioCallback(params);
    if (callback.kind === "malformed") {
      count("malformed");
      logger.warn({ messageId, problem: callback.problem }, "signed Twilio status callback that is not one");
      return errorResponse(c, 400, `Not a status callback: ${callback.problem}`);
    }
    if (callback.kind === "not_a_receipt") {
      count("not_a_receipt");
      logger.debug(
        { messageId, status: callback.status },
        "Twilio status callback before the carrier: nothing recorded",
      );
      return c.body(null, 200);
    }
    const { receipt } = callback;
    // A receipt recorded, a duplicate or one for no message of ours: 200. A failure of ours (the
    // database): 500 with nothing written; Twilio does not send the callback again (the provider
    // asks for no retries), so that receipt is lost, and a STOP is learnt again from the 21610 of
    // the next send.
    const outcome = UUID.test(messageId)
      ? await recordReceipt(deps.store, {
          messageId,
          channel: "sms",
          receipt,
          now: deps.now(),
          accounts: { all: accountNames, authenticated, ofOrganization },
        })
      : "unknown_message";
    // Signed by one of our accounts, but by none the message's callbacks may come from: as a
    // forgery. Signed by another account of its organization's list than the one that took it
    // (`other_account`): a genuine callback of an earlier attempt's copy, answered 200 below.
    if (outcome === "wrong_account") return refuse();
    count(outcome);
    const fields = {
      messageId,
      outcome,
      state: receipt.state,
      providerStatus: receipt.providerStatus,
      errorCode: receipt.errorCode,
      providerMessageId: receipt.providerMessageId,
    };
    if (outcome === "recorded" || outcome === "duplicate") logger.debug(fields, "Twilio delivery receipt");
    else logger.info(fields, "Twilio delivery receipt not recorded");
    return c.body(null, 200);
  });
  return app;
}
