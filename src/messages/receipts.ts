import { type Decision, decide } from "../domain/decide.js";
import type { Channel } from "../domain/events.js";
import type { DeliveryDelay, Receipt } from "../domain/receipts.js";
import type { MessageState } from "../domain/state.js";
import { suppressionReasonOfReceipt } from "../domain/suppression.js";
import { storedContentOf } from "../store/content.js";
import { ConcurrencyError } from "../store/events.js";
import type { MessageStore } from "../store/message-store.js";
import type { NewSuppression } from "../store/suppressions.js";

/**
 * Recording a provider's delivery receipt (docs/decisions/0038): the intake routes of each
 * provider check the receipt's signature and map it (src/channels/<channel>/receipts/), then hand
 * it here. The domain decides whether it moves the message's delivery forward.
 */

/**
 * What came of a receipt. Only `recorded` appended an event; the others are answered 200 all the
 * same (a provider that gets an error retries, for nothing), logged and counted.
 * - `duplicate`: it does not move the delivery forward (the same again, or a late lower one);
 * - `unknown_message`: no such message;
 * - `other_provider`: the message is another channel's, or another provider accepted it;
 * - `provider_id_mismatch`: it names another provider message id than the one recorded;
 * - `other_account`: authenticated by an account of the message's organization's list, but
 *   another account took the message (an earlier attempt went to this one, which may have sent it
 *   too): a genuine report of that copy, not of the message's; nothing is recorded;
 * - `wrong_account`: authenticated by none of the accounts it may come from (the one that took
 *   the message, or before that is known, those of the organization's list): nothing is
 *   recorded, and the intake answers as to a bad signature (docs/decisions/0046).
 */
export type ReceiptOutcome =
  | "recorded"
  | "duplicate"
  | "unknown_message"
  | "other_provider"
  | "provider_id_mismatch"
  | "other_account"
  | "wrong_account";

/**
 * Which accounts of a provider a receipt may come from (docs/decisions/0046): every account of it
 * the service sends through (`twilio:primary`, `twilio:backup`), those whose credentials
 * authenticated this receipt, and those of an organization's list (its own, or the default). The
 * receipt is recorded as the account's that took its message (its `success` names it); before that
 * success is recorded, as the first authenticated one of the message's organization's list: an
 * account another organization sends through (whose token that organization may know) never
 * speaks for this one's messages.
 */
export interface ReceiptAccounts {
  all: readonly string[];
  authenticated: readonly string[];
  ofOrganization(organizationId: string): readonly string[];
}

/** How many times a receipt is decided again after another writer (the worker) appended first. */
export const MAX_RECEIPT_CONFLICTS = 5;

/**
 * What recording a receipt needs of the store: `append` with the suppression list's entries the
 * receipt calls for, written in the same statement as its event (src/store/events.ts).
 */
export type ReceiptStore = Pick<MessageStore, "loadMessage" | "append">;

/**
 * The suppression list's entry a receipt calls for (docs/decisions/0039), if any. The entry is
 * the message's own recipient, by the blind index its accepted event holds (so a forged receipt
 * can only ever suppress a recipient of the message it names), and only when the message has
 * exactly one: which of several a receipt is about cannot be told without opening the content.
 * It is written with the receipt's event, in one statement: both commit or neither does, so a
 * failure leaves nothing half-written and the sender's retry (an SMTP server after our 451) is
 * recorded afresh, entry included. A duplicate of a receipt already recorded adds nothing: an
 * entry the organization lifted since stays lifted.
 */
function suppressionFrom(state: MessageState, receipt: Receipt): NewSuppression[] {
  const reason = suppressionReasonOfReceipt(receipt);
  if (!reason || state.status === "initial") return [];
  const keys = storedContentOf(state.message)?.recipientKeys;
  const recipientKey = keys?.length === 1 ? keys[0] : undefined;
  if (recipientKey === undefined) return [];
  return [
    {
      organizationId: state.message.organizationId,
      channel: state.message.channel,
      recipientKey,
      sealedRecipient: null,
      reason,
      messageId: state.message.id,
    },
  ];
}

export interface ReceiptRequest {
  messageId: string;
  /** The channel whose provider sent it. */
  channel: Channel;
  receipt: Receipt;
  now: Date;
  /** With several accounts of the receipt's provider: which it may come from (its `provider` is then ignored). */
  accounts?: ReceiptAccounts;
}

/**
 * Records a receipt for the message it names. Appending races the worker's appends (a receipt
 * may come while the attempt's outcome is being recorded): on a conflict the message is read
 * again and the receipt decided again on what is there now, up to {@link MAX_RECEIPT_CONFLICTS}
 * times (then the conflict is thrown: a 500; an SMTP sender retries after the 451 it becomes, Twilio does not).
 * Any failure of the append leaves nothing written: neither the event nor its suppression entry.
 */
export function recordReceipt(store: ReceiptStore, request: ReceiptRequest): Promise<ReceiptOutcome> {
  const { now } = request;
  return recordProviderWord(store, request, request.receipt, (state, provider) => {
    const receipt = { ...request.receipt, provider };
    return {
      decision: decide(state, { type: "record_receipt", receipt, now }),
      // A duplicate suppresses nothing: the entry came with the first (and one lifted since stays lifted).
      suppress: suppressionFrom(state, receipt),
    };
  });
}

export interface DelayRequest {
  messageId: string;
  /** The channel whose provider sent it. */
  channel: Channel;
  delay: DeliveryDelay;
  now: Date;
}

/**
 * Records a provider's word that it is still trying (an e-mail's delayed DSN) in the message's
 * history, as {@link recordReceipt} does a receipt: the same checks, the same outcomes (`recorded`,
 * or `duplicate` for a delay after the first or after a final receipt). It changes neither the
 * status nor the delivery, suppresses nothing and sends no webhook (docs/decisions/0040).
 */
export function recordDelay(store: ReceiptStore, request: DelayRequest): Promise<ReceiptOutcome> {
  const { delay, now } = request;
  return recordProviderWord(store, request, { ...delay, providerMessageId: null }, (state) => ({
    decision: decide(state, { type: "record_delay", delay, now }),
    suppress: [],
  }));
}

/**
 * What {@link recordReceipt} and {@link recordDelay} share: the message's checks (it exists, is of
 * the channel, was accepted by the provider that speaks, under the id it names), the decision,
 * and the append, decided again after a conflict.
 */
async function recordProviderWord(
  store: ReceiptStore,
  request: { messageId: string; channel: Channel; accounts?: ReceiptAccounts },
  from: { provider: string; providerMessageId: string | null },
  decideOn: (state: MessageState, provider: string) => { decision: Decision; suppress: NewSuppression[] },
): Promise<ReceiptOutcome> {
  for (let conflicts = 0; ; conflicts++) {
    const { state, events } = await store.loadMessage(request.messageId);
    if (state.status === "initial") return "unknown_message";
    if (state.message.channel !== request.channel) return "other_provider";
    // The provider that accepted it, and its id there: the last `success` (there is at most one).
    const success = events.findLast((stored) => stored.event.type === "success")?.event;
    const taker = success?.type === "success" ? success.data : undefined;
    const provider =
      accountOf(request.accounts, taker?.provider, state.message.organizationId) ?? from.provider;
    if (provider === WRONG_ACCOUNT) return "wrong_account";
    if (provider === OTHER_ACCOUNT) return "other_account";
    if (taker) {
      if (taker.provider !== provider) return "other_provider";
      const named = from.providerMessageId;
      if (named !== null && named !== taker.providerMessageId) return "provider_id_mismatch";
    }
    const { decision, suppress } = decideOn(state, provider);
    if (!("events" in decision)) return "unknown_message";
    if (decision.events.length === 0) return "duplicate";
    try {
      await store.append(state, decision.events, suppress);
      return "recorded";
    } catch (error) {
      if (error instanceof ConcurrencyError && conflicts < MAX_RECEIPT_CONFLICTS) continue;
      throw error;
    }
  }
}

const WRONG_ACCOUNT = Symbol("wrong account");
const OTHER_ACCOUNT = Symbol("other account");

/**
 * The account a receipt is from, among `accounts` (undefined without them):
 * - the message taken by one of them: that one, when it authenticated the receipt; else
 *   {@link OTHER_ACCOUNT} when an account of the organization's list did (a genuine report of an
 *   earlier attempt's copy), {@link WRONG_ACCOUNT} when none did;
 * - otherwise (no success recorded yet, or a message another provider took: `other_provider`, as
 *   before): the first of the organization's list that authenticated it, else {@link WRONG_ACCOUNT}.
 */
function accountOf(
  accounts: ReceiptAccounts | undefined,
  taker: string | undefined,
  organizationId: string,
): string | typeof WRONG_ACCOUNT | typeof OTHER_ACCOUNT | undefined {
  if (!accounts) return undefined;
  const own = accounts.ofOrganization(organizationId);
  const ownAuthenticated = accounts.authenticated.filter((name) => own.includes(name));
  if (taker !== undefined && accounts.all.includes(taker)) {
    if (accounts.authenticated.includes(taker)) return taker;
    return ownAuthenticated.length > 0 ? OTHER_ACCOUNT : WRONG_ACCOUNT;
  }
  return ownAuthenticated[0] ?? WRONG_ACCOUNT;
}
