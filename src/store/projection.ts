import type { messages } from "../../db/schema.js";
import type { MessageContent, MessageState } from "../domain/message.js";

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
    ...channelColumns(message),
  };
}

/** The record's channel-specific columns: `payload.message`, `payload.subject`, `payload.template_fields`. */
function channelColumns(message: MessageContent): Pick<MessageRow, "body" | "subject" | "templateFields"> {
  switch (message.channel) {
    case "sms":
      return { body: message.body, subject: null, templateFields: null };
    case "email":
      // The body is the template, rendered at delivery; the request's payload is kept as sent.
      return { body: null, subject: message.email.message.subject, templateFields: message.email };
    case "push":
      return { body: message.push.body, subject: message.push.title, templateFields: null };
    default: {
      const never: never = message;
      throw new Error(`unknown channel ${JSON.stringify(never)}`);
    }
  }
}
