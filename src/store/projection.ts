import type { messages } from "../../db/schema.js";
import { channelNamed } from "../channels/index.js";
import type { MessageState } from "../domain/state.js";
import { storedContentOf } from "./content.js";

export type MessageRow = typeof messages.$inferSelect;

/** The record's content columns of a content stored sealed: all in `content_enc`. */
const SEALED_COLUMNS = { body: null, subject: null, templateFields: null } as const;
/** What was measured of a content that is not measured (e-mail, push) or was not yet (decision 0043). */
const NOT_MEASURED = { segments: null, encoding: null } as const;

/**
 * The `messages` row for a state: a pure function of the state, so a rebuild from events gives
 * the same rows. A content the store keeps sealed (src/store/content.ts) goes in sealed, as its
 * `accepted` event holds it; one from before encryption, in clear.
 */
export function toMessageRow(state: MessageState): MessageRow {
  if (state.status === "initial") throw new Error("no record for a message that was never accepted");
  const { message } = state;
  const stored = storedContentOf(message);
  const channel = channelNamed(message.channel);
  // Kept in clear, so there whether the content is sealed, erased or not opened (the rebuild).
  const measured = channel.measures?.(message) ?? NOT_MEASURED;
  return {
    messageId: message.id,
    organizationId: message.organizationId,
    productId: message.productId,
    channel: message.channel,
    status: state.status,
    statusReason: state.status === "failed" || state.status === "rejected" ? state.reason : null,
    priority: message.priority,
    notificationType: message.notificationType,
    recipient: stored ? null : message.recipient,
    sender: message.sender,
    retryEnabled: message.retryEnabled,
    retryCount: state.retryCount,
    version: state.version,
    nextAttemptAt: state.status === "pending" && state.nextAttemptAt ? new Date(state.nextAttemptAt) : null,
    deliveryTime: state.status === "success" ? new Date(state.deliveredAt) : null,
    deliveryState: state.delivery.state,
    deliveryUpdatedAt: state.delivery.updatedAt === null ? null : new Date(state.delivery.updatedAt),
    deliveryErrorCode: state.delivery.errorCode,
    sendAt: message.sendAt === undefined ? null : new Date(message.sendAt),
    createdAt: new Date(state.acceptedAt),
    updatedAt: new Date(state.updatedAt),
    contentEnc: stored ? stored.sealed : null,
    recipientKeys: stored ? stored.recipientKeys : null,
    segments: measured.segments,
    encoding: measured.encoding,
    // The channel's own columns: `payload.message`, `payload.subject`, `payload.template_fields`.
    ...(stored ? SEALED_COLUMNS : channel.record(message)),
  };
}
