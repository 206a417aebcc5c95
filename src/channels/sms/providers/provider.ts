import type { Provider } from "../../providers/provider.js";

export interface SmsMessage {
  messageId: string;
  /** E.164 recipient. */
  to: string;
  /** Alphanumeric sender id, short code or E.164 number. */
  from: string;
  body: string;
  /** 1 for the first attempt. */
  attempt: number;
}

/** A way to hand an SMS to the outside world (see {@link Provider}). */
export type SmsProvider = Provider<SmsMessage>;
