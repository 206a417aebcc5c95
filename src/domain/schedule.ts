/**
 * Scheduled sends (issue 20, docs/decisions/0044): a message may name a `send_at`, the instant
 * before which no attempt starts. Pure: the caller passes the clock.
 */

const DAY = 24 * 60 * 60 * 1000;

/** The furthest a send may be scheduled ahead (Twilio's `SendAt` allows 35 days too). */
export const MAX_SCHEDULE_AHEAD_MS = 35 * DAY;

/**
 * A `send_at` this little in the past is taken as "now": the request spent that long on its way
 * (a client that sends `send_at` = its own now is not refused for the network's sake).
 */
export const SEND_AT_TOLERANCE_MS = 1000;

/**
 * Why a `send_at` cannot be taken at `now`, or undefined when it can. `horizonMs` is how far ahead
 * this installation takes one ({@link scheduleHorizonMs}).
 */
export function refuseSendAt(sendAt: Date, now: Date, horizonMs: number): string | undefined {
  const ahead = sendAt.getTime() - now.getTime();
  if (ahead < -SEND_AT_TOLERANCE_MS) return "send_at is in the past";
  if (ahead > horizonMs)
    return `send_at is more than ${Math.floor(horizonMs / DAY)} days ahead (at most ${new Date(now.getTime() + horizonMs).toISOString()})`;
  return undefined;
}

/**
 * How far ahead a send may be scheduled: 35 days, or less where messages are kept less long. A
 * message lives in the partition of the day it was accepted (docs/decisions/0042), dropped
 * `retentionDays` later: its last attempt (a day's time-to-live after `send_at` at most) must
 * come a day before that.
 */
export function scheduleHorizonMs(retentionDays: number): number {
  return Math.min(MAX_SCHEDULE_AHEAD_MS, (retentionDays - 2) * DAY);
}

/** Whether a message with this `send_at` waits (in Postgres) rather than going to the queue at once. */
export function isScheduledAhead(sendAt: Date | undefined, now: Date): sendAt is Date {
  return sendAt !== undefined && sendAt.getTime() > now.getTime();
}
