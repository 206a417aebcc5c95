import { SegmentedMessage } from "sms-segments-calculator";
import type { SmsSegments } from "../../src/channels/sms/segments.js";

/**
 * What Twilio's calculator (`sms-segments-calculator`) says of a body, smart encoding off: the
 * reference the service's own counts (src/channels/sms/segments.ts) are held to, in the tests and
 * in bench/micro/sms-segments.ts. The service never calls it: it costs tens of microseconds to
 * tens of milliseconds a body.
 */
export function librarySegments(body: string): SmsSegments {
  const message = new SegmentedMessage(body, "auto", false);
  return { segments: message.segmentsCount, encoding: message.encodingName };
}
