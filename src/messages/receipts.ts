import { decide } from "../domain/decide.js";
import type { Channel } from "../domain/events.js";
import type { Receipt } from "../domain/receipts.js";
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
 * - `provider_id_mismatch`: it names another provider message id than the one recorded.
 */
export type ReceiptOutcome =
  | "recorded"
  | "duplicate"
  | "unknown_message"
  | "other_provider"
  | "provider_id_mismatch";

/** How many times a receipt is decided again after another writer (the worker) appended first. */
export const MAX_RECEIPT_CONFLICTS = 5;

/** What recording a receipt needs of the store. */
export interface ReceiptStore extends Pick<MessageStore, "loadMessage" | "append"> {
  /**
   * Adds an entry to the suppression list (`suppressRecipient`, docs/decisions/0039); without it a
   * receipt suppresses nothing.
   */
  suppress?: (entry: NewSuppression) => Promise<unknown>;
}

/**
 * Puts the message's recipient on the suppression list when its receipt calls for it. The entry
 * is the message's own recipient, by the blind index its accepted event holds (so a forged
 * receipt can only ever suppress a recipient of the message it names), and only when the message
 * has exactly one: which of several a receipt is about cannot be told without opening the
 * content. Only a receipt just recorded: a duplicate never re-adds an entry the organization lifted.
 * The entry is written after the receipt's event: if it fails, the receipt stays recorded and the
 * entry is not made (Twilio does not send a status callback again after an error; an SMTP sender
 * whose report got a 451 does, but its report is then a duplicate).
 */
async function suppressFrom(store: ReceiptStore, state: MessageState, receipt: Receipt): Promise<void> {
  const reason = suppressionReasonOfReceipt(receipt);
  if (!reason || !store.suppress || state.status === "initial") return;
  const keys = storedContentOf(state.message)?.recipientKeys;
  const recipientKey = keys?.length === 1 ? keys[0] : undefined;
  if (recipientKey === undefined) return;
  await store.suppress({
    organizationId: state.message.organizationId,
    channel: state.message.channel,
    recipientKey,
    sealedRecipient: null,
    reason,
    messageId: state.message.id,
  });
}

export interface ReceiptRequest {
  messageId: string;
  /** The channel whose provider sent it. */
  channel: Channel;
  receipt: Receipt;
  now: Date;
}

/**
 * Records a receipt for the message it names. Appending races the worker's appends (a receipt
 * may come while the attempt's outcome is being recorded): on a conflict the message is read
 * again and the receipt decided again on what is there now, up to {@link MAX_RECEIPT_CONFLICTS}
 * times (then the conflict is thrown: a 500; an SMTP sender retries after the 451 it becomes, Twilio does not).
 */
export async function recordReceipt(store: ReceiptStore, request: ReceiptRequest): Promise<ReceiptOutcome> {
  for (let conflicts = 0; ; conflicts++) {
    const { state, events } = await store.loadMessage(request.messageId);
    if (state.status === "initial") return "unknown_message";
    if (state.message.channel !== request.channel) return "other_provider";
    // The provider that accepted it, and its id there: the last `success` (there is at most one).
    const success = events.findLast((stored) => stored.event.type === "success")?.event;
    if (success?.type === "success") {
      if (success.data.provider !== request.receipt.provider) return "other_provider";
      const named = request.receipt.providerMessageId;
      if (named !== null && named !== success.data.providerMessageId) return "provider_id_mismatch";
    }
    const decision = decide(state, { type: "record_receipt", receipt: request.receipt, now: request.now });
    if (!("events" in decision)) return "unknown_message";
    // A duplicate suppresses nothing: the entry came with the first (and one lifted since stays lifted).
    if (decision.events.length === 0) return "duplicate";
    try {
      await store.append(state, decision.events);
      await suppressFrom(store, state, request.receipt);
      return "recorded";
    } catch (error) {
      if (error instanceof ConcurrencyError && conflicts < MAX_RECEIPT_CONFLICTS) continue;
      throw error;
    }
  }
}
