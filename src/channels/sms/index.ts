import type { Channel } from "../channel.js";
import { prepareSms } from "./prepare.js";
import type { SmsMessage } from "./providers/provider.js";
import { refuseSms, smsContent, smsMeasures, smsPayload, smsSenderClaim } from "./request.js";

/** SMS: a text to a phone number, through Twilio or the simulator. */
export const sms: Channel<"sms", typeof smsPayload, SmsMessage> = {
  name: "sms",
  label: "SMS",
  route: {
    path: "/api/v1/notifications/sms",
    summary: "Send an SMS",
    description:
      "Sends `payload.body` to `payload.to`. The 202 says how many segments (messages billed) the body " +
      "takes and in which encoding (`GSM-7`, or `UCS-2` as soon as one character is outside GSM-7); a " +
      "body of more than `SMS_MAX_SEGMENTS` segments (default 10) is refused with a 400 naming the count.",
  },
  payload: smsPayload,
  refuse: refuseSms,
  content: smsContent,
  sender: smsSenderClaim,
  record: (message) => ({ body: message.body, subject: null, templateFields: null }),
  measures: smsMeasures,
  prepare: prepareSms,
  createProvider: async (config, options) =>
    (await import("./providers/index.js")).createSmsProvider(config, options),
};
