import { SegmentedMessage } from "sms-segments-calculator";
import type { SmsEncoding } from "./content.js";

/**
 * How an SMS body is sent: its alphabet and how many segments (each billed as one message) it
 * takes, by the rules carriers and Twilio apply (docs/decisions/0043). Pure: no I/O.
 *
 * GSM-7 when every character is in GSM 03.38's basic set or its extension table (an extension
 * character, `€ [ ] { } \ ^ ~ |` and form feed, costs two septets: the escape and itself); else
 * UCS-2, where every UTF-16 unit costs two bytes. One segment holds 160 septets or 70 UCS-2 units;
 * a longer body is split into segments of 153 or 67, each losing room to the header that joins
 * them again, and a character (an extension pair, a surrogate pair, a whole grapheme) is never
 * split across two. Twilio's "smart encoding" (replacing curly quotes and the like to stay in
 * GSM-7) is off, as it is by default at Twilio: the body is counted as it will be sent.
 */
export interface SmsSegments {
  segments: number;
  encoding: SmsEncoding;
}

/**
 * GSM 03.38's basic character set, in table order without the escape (0x1B). Line feed and
 * carriage return are in it; the other control characters are not.
 */
const GSM_BASIC =
  "@£$¥èéùìòÇ\nØø\rÅåΔ_ΦΓΛΩΠΨΣΘΞÆæßÉ !\"#¤%&'()*+,-./0123456789:;<=>?" +
  "¡ABCDEFGHIJKLMNOPQRSTUVWXYZÄÖÑÜ§¿abcdefghijklmnopqrstuvwxyzäöñüà";
/** GSM 03.38's extension table: each one is sent as the escape and a second septet. */
const GSM_EXTENSION = "\f^{}\\[~]|€";

/** Septets per UTF-16 code unit, 0 for one outside GSM-7; `€` (U+20AC) is the highest there is. */
const SEPTETS = new Uint8Array(0x20ad);
for (const char of GSM_BASIC) SEPTETS[char.charCodeAt(0)] = 1;
for (const char of GSM_EXTENSION) SEPTETS[char.charCodeAt(0)] = 2;

const SINGLE_GSM_SEPTETS = 160;
const CONCATENATED_GSM_SEPTETS = 153;

/**
 * The encoding and segment count of `body`. A body of GSM-7 characters only (nearly every OTP and
 * notice) is counted here in one pass; any other goes to `sms-segments-calculator`, Twilio's own
 * calculator, which costs tens to hundreds of microseconds a body (bench/micro/sms-segments.ts).
 * A property test holds the two to the same answers (test/unit/channels/sms-segments.test.ts).
 */
export function smsSegments(body: string): SmsSegments {
  const gsm = gsm7Segments(body);
  if (gsm !== undefined) return { segments: gsm, encoding: "GSM-7" };
  return librarySegments(body);
}

/** What Twilio's calculator says, smart encoding off: the reference the fast path is held to. */
export function librarySegments(body: string): SmsSegments {
  const message = new SegmentedMessage(body, "auto", false);
  return { segments: message.segmentsCount, encoding: message.encodingName };
}

/**
 * The segment count of a body made only of GSM-7 characters; undefined for any other body. The
 * segments of a long body are filled in order with whole characters, so an extension pair that
 * would straddle a boundary starts the next segment.
 */
function gsm7Segments(body: string): number | undefined {
  let septets = 0;
  let segments = 1;
  let inSegment = 0;
  for (let i = 0; i < body.length; i++) {
    const size = SEPTETS[body.charCodeAt(i)] ?? 0;
    if (size === 0) return undefined;
    septets += size;
    inSegment += size;
    if (inSegment > CONCATENATED_GSM_SEPTETS) {
      segments++;
      inSegment = size;
    }
  }
  return septets <= SINGLE_GSM_SEPTETS ? 1 : segments;
}
