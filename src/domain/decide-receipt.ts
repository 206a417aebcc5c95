import type { MessageEvent } from "./events.js";
import { advancesDelivery, type DeliveryDelay, notesDelay, type Receipt } from "./receipts.js";
import type { MessageState } from "./state.js";

/**
 * The `record_receipt` command of `decide`: a receipt is recorded, in any status after
 * `accepted`, when it moves the delivery forward (src/domain/receipts.ts DELIVERY_RANK); a
 * duplicate or a late lower one decides no events. It keeps the message's status and retry count.
 */
export function recordReceipt(
  state: MessageState,
  receipt: Receipt,
  now: Date,
): { events: MessageEvent[] } | { refused: "illegal"; reason: string } {
  if (state.status === "initial")
    return { refused: "illegal", reason: "no receipt for a message never accepted" };
  if (!advancesDelivery(state.delivery.state, receipt.state)) return { events: [] };
  return {
    events: [
      {
        type: "receipt",
        retryCount: state.retryCount,
        occurredAt: now.toISOString(),
        data: {
          state: receipt.state,
          errorCode: receipt.errorCode,
          provider: receipt.provider,
          providerStatus: receipt.providerStatus,
          providerMessageId: receipt.providerMessageId,
          status: state.status,
        },
      },
    ],
  };
}

/**
 * The `record_delay` command of `decide`: a provider still trying (an e-mail's delayed DSN) is
 * recorded, in any status after `accepted`, as a `delivery_delayed` event, history only; the first
 * delay alone, and none once a final receipt came (src/domain/receipts.ts notesDelay): a duplicate
 * decides no events.
 */
export function recordDelay(
  state: MessageState,
  delay: DeliveryDelay,
  now: Date,
): { events: MessageEvent[] } | { refused: "illegal"; reason: string } {
  if (state.status === "initial")
    return { refused: "illegal", reason: "no delay for a message never accepted" };
  if (!notesDelay(state.delivery.state, state.delayNoted)) return { events: [] };
  return {
    events: [
      {
        type: "delivery_delayed",
        retryCount: state.retryCount,
        occurredAt: now.toISOString(),
        data: {
          errorCode: delay.errorCode,
          provider: delay.provider,
          providerStatus: delay.providerStatus,
          status: state.status,
        },
      },
    ],
  };
}
