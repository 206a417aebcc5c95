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
      /**
       * How many segments (messages billed) the body is sent as, and in which alphabet: counted
       * at acceptance (src/channels/sms/segments.ts). Not personal data, so kept in clear beside
       * the sealed body. Absent from messages accepted before they were counted (decision 0043).
       */
      segments?: number;
      encoding?: SmsEncoding;
    };
  }
}
