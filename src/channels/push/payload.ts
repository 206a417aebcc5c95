/**
 * What a push message's service worker receives, as JSON text. `message_id` lets it drop the
 * duplicate a retry may cause; `data` is left out when the sender gave none.
 */
export function pushPayloadText(messageId: string, title: string, body: string, data: unknown): string {
  return JSON.stringify({
    title,
    body,
    ...(data !== undefined && data !== null && { data }),
    message_id: messageId,
  });
}
