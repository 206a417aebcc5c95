import { z } from "zod";
import { emailAddress } from "../../../channels/email/request.js";
import { pushEndpoint } from "../../../channels/push/request.js";
import { phoneNumber } from "../../../channels/sms/request.js";
import { CHANNELS, type Channel } from "../../../domain/events.js";
import { SUPPRESSION_REASONS } from "../../../domain/suppression.js";
import type { ListedSuppression } from "../../../store/suppressions.js";

/**
 * What the suppression routes share (docs/decisions/0039): the entry they answer with and how a
 * recipient is checked and normalised per channel, as the send requests check it.
 */

/** Each channel's recipient, validated as its send request validates it. */
const RECIPIENTS: Record<Channel, z.ZodType<string, string>> = {
  sms: phoneNumber,
  email: emailAddress,
  push: pushEndpoint,
};

export const channel = z
  .enum(CHANNELS, { error: () => `must be one of: ${CHANNELS.join(", ")}` })
  .meta({ description: "The channel the recipient is suppressed on" });

/** A recipient of `channel`, normalised (E.164; an address or endpoint as given, compared without case), or the reason it is not one. */
export function parseRecipient(
  channelName: Channel,
  value: string,
): { ok: true; recipient: string } | { ok: false; error: string } {
  const parsed = RECIPIENTS[channelName].safeParse(value.trim());
  if (!parsed.success) return { ok: false, error: parsed.error.issues[0]?.message ?? "is not a recipient" };
  return { ok: true, recipient: parsed.data };
}

export const suppressionRecord = z
  .object({
    channel: z.enum(CHANNELS),
    recipient: z.string().nullable().meta({
      description:
        "E.164 number, e-mail address or push endpoint, in lower case; null once the recipient's content was erased, and for an entry a delivery receipt added (the message names it; the entry applies all the same)",
    }),
    reason: z.enum(SUPPRESSION_REASONS).meta({
      description:
        "stop: the recipient opted out (STOP); hard_bounce; complaint: marked as spam; subscription_gone: the push service answered 404/410; manual",
    }),
    message_id: z
      .uuid()
      .nullable()
      .meta({ description: "The message whose outcome or receipt added it; null when manual" }),
    created_at: z.iso.datetime(),
  })
  .meta({ id: "Suppression" });

export function toSuppressionRecord(entry: ListedSuppression): z.output<typeof suppressionRecord> {
  return {
    channel: entry.channel,
    recipient: entry.recipient,
    reason: entry.reason,
    message_id: entry.messageId,
    created_at: entry.createdAt.toISOString(),
  };
}
