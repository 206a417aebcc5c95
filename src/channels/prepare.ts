import type { Database } from "../../db/client.js";
import type { MessageContent } from "../domain/events.js";
import type { Prepared } from "./channel.js";
import { channelNamed, type Providers } from "./index.js";

export type { Prepared } from "./channel.js";
export type { Providers } from "./index.js";

/**
 * Gets a message ready for its channel's provider (see each channel's `prepare.ts`). Throws only
 * when the database does, or when the template sandbox cannot start its thread (both worth retrying).
 */
export async function prepareDelivery(
  deps: { db: Database; providers: Providers; now: () => Date },
  message: MessageContent,
): Promise<Prepared> {
  const channel = channelNamed(message.channel);
  return channel.prepare(message, {
    db: deps.db,
    provider: deps.providers[message.channel],
    now: deps.now,
  });
}
