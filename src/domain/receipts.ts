/**
 * Delivery receipts (issue 17, docs/decisions/0038): what a provider says, after accepting a
 * message, about what reached the recipient. A receipt is an event (`receipt`) that never changes
 * the message's `status` (the outcome of our attempts); it folds into the message's `delivery`.
 * Pure: the channels map their providers' words (Twilio's `MessageStatus`, later an e-mail's DSN
 * or complaint, a push service's answer) onto these states.
 */

export const DELIVERY_STATES = [
  "unknown",
  "sent",
  "delivered",
  "undelivered",
  "bounced",
  "complained",
] as const;
export type DeliveryState = (typeof DELIVERY_STATES)[number];
/** What a receipt may say: any state but `unknown` (which is only ever the absence of receipts). */
export type ReceiptState = Exclude<DeliveryState, "unknown">;
export const RECEIPT_STATES = DELIVERY_STATES.filter(
  (state): state is ReceiptState => state !== "unknown",
) as readonly ReceiptState[];

/**
 * The order of the states: a receipt changes `delivery` only when its state ranks higher than
 * the current one, so receipts are forward-only and may come in any order and any number of
 * times (a duplicate, or a late `sent` after `delivered`, changes nothing: the domain appends
 * nothing for it).
 *
 * - `sent` (handed on: to the carrier, to the recipient's mail server) is below every outcome.
 * - `undelivered` (the carrier or the provider gave up) is below `delivered`: a carrier that
 *   reports a failure and then the handset's confirmation has the last word with the confirmation
 *   (Twilio sends `failed`/`undelivered` and usually nothing after; a `delivered` after it is the
 *   carrier correcting itself). A failure after `delivered` changes nothing.
 * - `bounced` (e-mail: a permanent DSN) outranks `delivered`: a mail server may accept a message
 *   and bounce it later.
 * - `complained` (e-mail: the recipient reported it as spam) is the last word of all: the message
 *   reached the recipient, who refused it.
 *
 * Two receipts of the same rank keep the first (its error code and time stay).
 */
export const DELIVERY_RANK: Readonly<Record<DeliveryState, number>> = {
  unknown: 0,
  sent: 1,
  undelivered: 2,
  delivered: 3,
  bounced: 4,
  complained: 5,
};

/**
 * States no later receipt is expected to follow (the provider's final word). Nothing times out:
 * a message whose receipts stop at `sent` (Twilio gives up after 72 hours without the carrier's
 * report) stays `sent`, its last known state, for good.
 */
export const FINAL_DELIVERY_STATES: readonly DeliveryState[] = [
  "delivered",
  "undelivered",
  "bounced",
  "complained",
];

/** What a provider's receipt says, as the channel mapped it. */
export interface Receipt {
  state: ReceiptState;
  /**
   * The provider's error code (Twilio's `ErrorCode`, e.g. `30003`; an e-mail's enhanced status
   * code, e.g. `5.1.1`), or null when it gave none.
   */
  errorCode: string | null;
  /** The provider that sent it (`twilio`). */
  provider: string;
  /** The provider's own word for the state (Twilio's `MessageStatus`), for the history. */
  providerStatus: string;
  /** The provider's id of the message, when the receipt carries one. */
  providerMessageId: string | null;
}

/** A receipt event's data: the receipt (the event adds the message's status when it came). */
export type ReceiptData = Receipt;

/**
 * A provider's word that it has not delivered yet and is still trying (an e-mail's delayed DSN:
 * `Action: delayed`, a `4.x.x` status). History only (docs/decisions/0040): it is recorded as a
 * `delivery_delayed` event that changes neither the status nor the delivery, and sends no webhook.
 */
export interface DeliveryDelay {
  /** The provider's code (an enhanced status code, `4.4.1`), or null when it gave none. */
  errorCode: string | null;
  provider: string;
  /** The provider's own word (`delayed`). */
  providerStatus: string;
}

/** A `delivery_delayed` event's data: the delay (the event adds the message's status when it came). */
export type DelayData = DeliveryDelay;

/**
 * Whether a delay is worth a `delivery_delayed` event: the first one only (the same DSN again,
 * or the next warning of a server still trying, says nothing new), and only while no final
 * receipt has come (a delay after a bounce or a delivery is stale).
 */
export function notesDelay(delivery: DeliveryState, delayNoted: boolean): boolean {
  return !delayNoted && !FINAL_DELIVERY_STATES.includes(delivery);
}

/** What the receipts said so far, on the state and the record. */
export interface Delivery {
  state: DeliveryState;
  /** When the receipt that set `state` was recorded (ISO 8601); null while `unknown`. */
  updatedAt: string | null;
  /** That receipt's error code, if it had one. */
  errorCode: string | null;
}

export const UNKNOWN_DELIVERY: Delivery = { state: "unknown", updatedAt: null, errorCode: null };

/** Whether a receipt saying `state` changes a delivery now at `current` (it ranks higher). */
export function advancesDelivery(current: DeliveryState, state: ReceiptState): boolean {
  return DELIVERY_RANK[state] > DELIVERY_RANK[current];
}

/** The delivery after a receipt recorded at `occurredAt`: forward-only (see {@link DELIVERY_RANK}). */
export function applyReceipt(delivery: Delivery, receipt: Receipt, occurredAt: string): Delivery {
  if (!advancesDelivery(delivery.state, receipt.state)) return delivery;
  return { state: receipt.state, updatedAt: occurredAt, errorCode: receipt.errorCode };
}
