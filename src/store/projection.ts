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

/** A `messages` row keyed by column name, for statements that insert JSON (`json_to_recordset`). */
export function recordColumns(row: MessageRow) {
  return {
    message_id: row.messageId,
    organization_id: row.organizationId,
    product_id: row.productId,
    channel: row.channel,
    status: row.status,
    priority: row.priority,
    notification_type: row.notificationType,
    recipient: row.recipient,
    sender: row.sender,
    body: row.body,
    subject: row.subject,
    template_fields: row.templateFields,
    retry_enabled: row.retryEnabled,
    retry_count: row.retryCount,
    version: row.version,
    next_attempt_at: row.nextAttemptAt,
    delivery_time: row.deliveryTime,
    created_at: row.createdAt,
    updated_at: row.updatedAt,
  };
}
