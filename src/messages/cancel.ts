import { decide } from "../domain/decide.js";
import type { Status } from "../domain/events.js";
import type { MessageState } from "../domain/state.js";
import { ConcurrencyError } from "../store/events.js";
import type { MessageStore } from "../store/message-store.js";

/**
 * Canceling a message before its first attempt (issue 20, docs/decisions/0044): the domain
 * decides, the event sequence settles a race with a worker starting that attempt.
 */

/**
 * - `canceled`: the message is `rejected` with reason `canceled`, by this request or an earlier
 *   one (a repeated cancel is answered the same);
 * - `too_late`: its first attempt had started (or it ended otherwise): `status` says where it is;
 * - `not_found`: no such message in the organization (another organization's looks the same).
 */
export type CancelOutcome =
  | { outcome: "canceled" }
  | { outcome: "too_late"; status: Status }
  | { outcome: "not_found" };

/**
 * How many times a cancel is decided again after another writer appended first: one conflict is
 * the worker's attempt starting (after which the answer is "too late"); more are receipts racing.
 */
const MAX_CANCEL_CONFLICTS = 5;

export async function cancelMessage(
  deps: { store: Pick<MessageStore, "loadMessage" | "append">; now: () => Date },
  organizationId: string,
  messageId: string,
): Promise<CancelOutcome> {
  for (let conflicts = 0; ; conflicts++) {
    const { state } = await deps.store.loadMessage(messageId);
    if (state.status === "initial" || state.message.organizationId !== organizationId)
      return { outcome: "not_found" };
    if (isCanceled(state)) return { outcome: "canceled" };
    const decision = decide(state, { type: "cancel", now: deps.now() });
    if (!("events" in decision)) return { outcome: "too_late", status: state.status };
    try {
      await deps.store.append(state, decision.events);
      return { outcome: "canceled" };
    } catch (error) {
      // The worker started the attempt (or a receipt came) first: decide again on what is there.
      if (error instanceof ConcurrencyError && conflicts < MAX_CANCEL_CONFLICTS) continue;
      throw error;
    }
  }
}

function isCanceled(state: MessageState): boolean {
  return state.status === "rejected" && state.reason === "canceled";
}
