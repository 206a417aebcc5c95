import type { MessageRow } from "./projection.js";

/**
 * The message record of spec section 2.5, field names exactly as the spec writes them
 * (including `payload.Organization_id`). Every field is present; `null` where there is no value.
 */
export function toMessageRecord(row: MessageRow) {
  return {
    message_id: row.messageId,
    channel: row.channel,
    status: row.status,
    delivery_time: row.deliveryTime?.toISOString() ?? null,
    organization_id: row.organizationId,
    product_id: row.productId,
    receiver_id: row.recipient,
    sender_id: row.sender,
    retry_count: row.retryCount,
    created_at: row.createdAt.toISOString(),
    updated_at: row.updatedAt.toISOString(),
    payload: {
      Organization_id: row.organizationId,
      channel: row.channel,
      id: row.messageId,
      message: row.body,
      priority: row.priority,
      product_id: row.productId,
      recipient: row.recipient,
      retry_enabled: row.retryEnabled,
      sender: row.sender,
      retry_count: row.retryCount,
      subject: row.subject,
      template_fields: row.templateFields ?? null,
    },
  };
}
