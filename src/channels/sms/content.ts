/**
 * What an SMS message carries besides the common fields (the recipient's E.164 number and the
 * sender are common), exactly as events store it. Pure, like the domain that holds it.
 */

/** The two alphabets an SMS is sent in (3GPP TS 23.038), by the names the API answers with. */
export const SMS_ENCODINGS = ["GSM-7", "UCS-2"] as const;
export type SmsEncoding = (typeof SMS_ENCODINGS)[number];

declare module "../../domain/events.js" {
  interface ChannelContents {
    sms: {
      /** The text: 1-1600 characters. */
      body: string;
    };
  }
}
