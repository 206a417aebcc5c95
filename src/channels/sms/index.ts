import type { Channel } from "../channel.js";
import { prepareSms } from "./prepare.js";
import type { SmsMessage } from "./providers/provider.js";
import { smsContent, smsPayload, smsSenderClaim } from "./request.js";

/** SMS: a text to a phone number, through Twilio or the simulator. */
export const sms: Channel<"sms", typeof smsPayload, SmsMessage> = {
  name: "sms",
  label: "SMS",
  route: {
    path: "/api/v1/notifications/sms",
    summary: "Send an SMS",
    description: "Sends `payload.body` to `payload.to`.",
  },
  payload: smsPayload,
  content: smsContent,
  sender: smsSenderClaim,
  record: (message) => ({ body: message.body, subject: null, templateFields: null }),
  prepare: prepareSms,
  createProvider: async (config, options) =>
    (await import("./providers/index.js")).createSmsProvider(config, options),
};
