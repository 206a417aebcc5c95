import type { SmsEncoding } from "./content.js";
import { graphemeEnd } from "./graphemes.js";

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
const SINGLE_UCS2_UNITS = 70;
const CONCATENATED_UCS2_UNITS = 67;

/**
 * Code points that are a grapheme of their own beside any other of this list (Unicode's grapheme
 * break class Other, Control or a Hangul syllable, in the data of the calculator's grapheme
 * splitter): no combining mark, joiner, variation selector, emoji modifier, regional indicator or
 * Hangul jamo, which join their neighbours and are counted grapheme by grapheme. Latin (with
 * Latin-1, Extended-A/B and Vietnamese), Greek, Cyrillic, Hebrew and Arabic letters, Thai
 * consonants, punctuation, currency, letterlike, arrows, mathematical and technical signs, box
 * drawing and shapes, symbols and dingbats, CJK (with kana and full-width forms), Hangul
 * syllables, and the emoji of the main pictograph blocks. A test checks each one against the
 * splitter.
 */
export const STANDALONE_UCS2_RANGES: ReadonlyArray<readonly [number, number]> = [
  [0x0000, 0x02ff],
  [0x0370, 0x03ff],
  [0x0400, 0x0482],
  [0x048a, 0x052f],
  [0x05d0, 0x05ea],
  [0x0620, 0x064a],
  [0x0e01, 0x0e30],
  [0x1e00, 0x1eff],
  [0x2010, 0x2027],
  [0x2030, 0x205e],
  [0x20a0, 0x20c0],
  [0x2100, 0x214f],
  [0x2190, 0x23ff],
  [0x2460, 0x27bf],
  [0x3000, 0x3029],
  [0x3030, 0x303f],
  [0x3041, 0x3096],
  [0x309b, 0x30ff],
  [0x4e00, 0x9fff],
  [0xac00, 0xd7a3],
  [0xff01, 0xff9d],
  [0xffa0, 0xffef],
  [0x1f300, 0x1f3fa],
  [0x1f400, 0x1f64f],
  [0x1f680, 0x1f6ff],
  [0x1f900, 0x1f9ff],
];

/** 1 for a BMP code unit of {@link STANDALONE_UCS2_RANGES}. */
const STANDALONE_BMP = new Uint8Array(0x10000);
for (const [first, last] of STANDALONE_UCS2_RANGES)
  for (let code = first; code <= Math.min(last, 0xffff); code++) STANDALONE_BMP[code] = 1;
/** The ranges beyond the BMP, flat: first, last, first, last… */
const STANDALONE_ASTRAL = STANDALONE_UCS2_RANGES.filter(([first]) => first > 0xffff).flat();

/**
 * The encoding and segment count of `body`, as Twilio's calculator (`sms-segments-calculator`)
 * counts it, in time linear in the body. A body of GSM-7 characters only (nearly every OTP and
 * notice), or of characters that are each a grapheme of their own (most text in other scripts,
 * emoji without modifiers or joiners), is counted in one pass; any other (combining marks,
 * joiners, modifiers, flags, jamo…) is split into graphemes as the calculator splits it
 * (./graphemes.ts) and they are packed as it packs them. The calculator itself costs tens of
 * microseconds to tens of milliseconds a body (bench/micro/sms-segments.ts); tests hold the counts
 * to its answers (test/unit/channels/sms-segments.test.ts).
 */
export function smsSegments(body: string): SmsSegments {
  const gsm = gsm7Segments(body);
  if (gsm !== undefined) return { segments: gsm, encoding: "GSM-7" };
  const ucs2 = ucs2Segments(body);
  if (ucs2 !== undefined) return { segments: ucs2, encoding: "UCS-2" };
  return { segments: atLeastTheUnits(graphemeSegments(body), body.length), encoding: "UCS-2" };
}

/**
 * Where the calculator is wrong, the bill is not: a grapheme longer than a segment (a letter with
 * hundreds of accents, a long ZWJ chain) gets "one of its own" there, however long, but a segment
 * carries 67 UCS-2 units at most, so a body of `units` units takes at least ceil(units / 67). Only
 * such bodies are counted above the calculator (docs/decisions/0043), and `SMS_MAX_SEGMENTS` holds
 * for them too.
 */
function atLeastTheUnits(segments: number, units: number): number {
  return units <= SINGLE_UCS2_UNITS
    ? segments
    : Math.max(segments, Math.ceil(units / CONCATENATED_UCS2_UNITS));
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

/**
 * The segment count of a UCS-2 body whose every code point is a grapheme of its own
 * ({@link STANDALONE_UCS2_RANGES}); undefined for any other body. A code point outside the BMP is
 * two units, and like any grapheme is never split across segments.
 */
function ucs2Segments(body: string): number | undefined {
  let units = 0;
  let segments = 1;
  let inSegment = 0;
  for (let i = 0; i < body.length; i++) {
    const code = body.charCodeAt(i);
    let size = 1;
    if (code >= 0xd800 && code <= 0xdfff) {
      const low = body.charCodeAt(i + 1);
      if (code > 0xdbff || !(low >= 0xdc00 && low <= 0xdfff)) return undefined;
      if (!isStandaloneAstral(((code - 0xd800) << 10) + (low - 0xdc00) + 0x10000)) return undefined;
      size = 2;
      i++;
    } else if (STANDALONE_BMP[code] !== 1) return undefined;
    units += size;
    inSegment += size;
    if (inSegment > CONCATENATED_UCS2_UNITS) {
      segments++;
      inSegment = size;
    }
  }
  return units <= SINGLE_UCS2_UNITS ? 1 : segments;
}

/**
 * The segment count of a UCS-2 body, grapheme by grapheme, as the calculator packs them (its
 * `_buildSegments`): a grapheme that does not fit in what is left of the current segment starts
 * the next one; when the first segment overflows it gets its header too, and the graphemes past
 * its 67 units move on to the second, ahead of the one that did not fit. So a grapheme longer
 * than a segment (a letter with a hundred accents) fills one of its own, past its room, and the
 * next grapheme starts another: a body of one 100-unit grapheme is two segments, the first empty.
 * (A body not GSM-7 is UCS-2 for the calculator too: the grapheme with the character GSM-7 lacks
 * is either that character alone or longer than one unit.)
 */
function graphemeSegments(body: string): number {
  let segments = 1;
  let capacity = SINGLE_UCS2_UNITS; // until the first segment overflows
  let inSegment = 0;
  const firstSegment: number[] = []; // the sizes of its graphemes, to move those past 67 units
  for (let start = 0; start < body.length; ) {
    const end = graphemeEnd(body, start);
    const size = end - start;
    start = end;
    if (capacity - inSegment < size) {
      let moved = 0;
      if (capacity === SINGLE_UCS2_UNITS) {
        for (let kept = inSegment; kept > CONCATENATED_UCS2_UNITS; ) {
          const last = firstSegment.pop() ?? 0;
          kept -= last;
          moved += last;
        }
        capacity = CONCATENATED_UCS2_UNITS;
      }
      segments++;
      inSegment = moved;
    } else if (capacity === SINGLE_UCS2_UNITS) firstSegment.push(size);
    inSegment += size;
  }
  return segments;
}

function isStandaloneAstral(codePoint: number): boolean {
  for (let r = 0; r < STANDALONE_ASTRAL.length; r += 2)
    if (codePoint >= (STANDALONE_ASTRAL[r] ?? 0) && codePoint <= (STANDALONE_ASTRAL[r + 1] ?? -1))
      return true;
  return false;
}
