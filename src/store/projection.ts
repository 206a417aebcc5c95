import type { messages } from "../../db/schema.js";
import { channelNamed } from "../channels/index.js";
import type { MessageState } from "../domain/state.js";

export type MessageRow = typeof messages.$inferSelect;

/** The `messages` row for a state: a pure function, so a rebuild from events gives the same rows. */
export function toMessageRow(state: MessageState): MessageRow {
  if (state.status === "initial") throw new Error("no record for a message that was never accepted");
  const { message } = state;
  return {
    messageId: message.id,
    organizationId: message.organizationId,
    productId: message.productId,
    channel: message.channel,
    status: state.status,
    priority: message.priority,
    notificationType: message.notificationType,
    recipient: message.recipient,
    sender: message.sender,
    retryEnabled: message.retryEnabled,
    retryCount: state.retryCount,
    version: state.version,
    nextAttemptAt: state.status === "pending" && state.nextAttemptAt ? new Date(state.nextAttemptAt) : null,
    deliveryTime: state.status === "success" ? new Date(state.deliveredAt) : null,
    createdAt: new Date(state.acceptedAt),
    updatedAt: new Date(state.updatedAt),
    // The channel's own columns: `payload.message`, `payload.subject`, `payload.template_fields`.
    ...channelNamed(message.channel).record(message),
  };
}
