/**
 * What an SMS message carries besides the common fields (the recipient's E.164 number and the
 * sender are common), exactly as events store it. Pure, like the domain that holds it.
 */

declare module "../../domain/events.js" {
  interface ChannelContents {
    sms: {
      /** The text: 1-1600 characters. */
      body: string;
    };
  }
}

export {};
