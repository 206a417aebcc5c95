import { type MessageOf, type PrepareDeps, type Prepared, readyFor } from "../channel.js";
import type { SmsMessage } from "./providers/provider.js";

/** An SMS needs nothing prepared: it goes as it was accepted. */
export function prepareSms(message: MessageOf<"sms">, { provider }: PrepareDeps<SmsMessage>): Prepared {
  return readyFor(provider, (attempt) => ({
    messageId: message.id,
    to: message.recipient,
    from: message.sender,
    body: message.body,
    attempt,
  }));
}
