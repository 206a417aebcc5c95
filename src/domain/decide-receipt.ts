import type { MessageEvent } from "./events.js";
import { advancesDelivery, type Receipt } from "./receipts.js";
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
