import { GRAPHEME_BREAK_DATA } from "./grapheme-break-data.js";

/**
 * Grapheme boundaries exactly as `sms-segments-calculator` draws them (docs/decisions/0043), in
 * time linear in the text. The calculator splits a body with `grapheme-splitter` (UAX #29 of
 * Unicode 10.0.0) and then cuts each CR LF grapheme in two; that splitter looks up a code point's
 * class through a chain of some 1,400 tests (about 1.7 µs a code point) and, for each code point
 * it adds to a grapheme, re-reads the whole grapheme so far, so a grapheme of n code points costs
 * n². Here the classes come from a table made from the splitter's own data
 * (./grapheme-break-data.ts, scripts/grapheme-break-data.ts) and its `shouldBreak` is kept as a
 * few facts about the grapheme so far, updated per code point.
 *
 * Those facts reproduce `shouldBreak`'s answers, including where they differ from today's UAX
 * #29 (the calculator is the reference): after a flag (two regional indicators) the splitter
 * joins one mark and then breaks again (`🇫🇷◌́ | ◌́`); between an emoji base and its modifier it
 * allows one Extend, not a run; only the emoji of Unicode 10's Glue_After_Zwj and
 * E_Base_GAZ classes join after a ZWJ; a Prepend before a flag breaks inside the flag; and there
 * is no rule for Indic conjuncts (GB9c). test/unit/channels/sms-graphemes.test.ts holds the two
 * to the same boundaries.
 */

// The splitter's classes (its own names), Other being 0.
const OTHER = 0;
const CR = 1;
const LF = 2;
const CONTROL = 3;
const EXTEND = 4;
const REGIONAL_INDICATOR = 5;
const SPACING_MARK = 6;
const L = 7;
const V = 8;
const T = 9;
const LV = 10;
const LVT = 11;
const PREPEND = 12;
const E_BASE = 13;
const E_MODIFIER = 14;
const ZWJ = 15;
const GLUE_AFTER_ZWJ = 16;
const E_BASE_GAZ = 17;
/** Before the first code point of a grapheme: no class. */
const NONE = -1;

const CLASS_OF_NAME: Record<keyof typeof GRAPHEME_BREAK_DATA, number> = {
  Prepend: PREPEND,
  CR,
  LF,
  Control: CONTROL,
  Extend: EXTEND,
  Regional_Indicator: REGIONAL_INDICATOR,
  SpacingMark: SPACING_MARK,
  L,
  V,
  T,
  LV,
  LVT,
  E_Base: E_BASE,
  E_Modifier: E_MODIFIER,
  ZWJ,
  Glue_After_Zwj: GLUE_AFTER_ZWJ,
  E_Base_GAZ: E_BASE_GAZ,
};

/** The class of each code point of the first two planes, where all but a few of the ranges are. */
const LOW_PLANES = 0x20000;
const CLASS_LOW = new Uint8Array(LOW_PLANES);
/** The ranges beyond them, flat: first, last, class, first, last, class… */
const CLASS_HIGH: number[] = [];
for (const [name, ranges] of Object.entries(GRAPHEME_BREAK_DATA)) {
  const type = CLASS_OF_NAME[name as keyof typeof GRAPHEME_BREAK_DATA];
  for (const range of ranges.split(" ")) {
    const [first = "", last = first] = range.split("-");
    const from = Number.parseInt(first, 16);
    const to = Number.parseInt(last, 16);
    if (from >= LOW_PLANES) CLASS_HIGH.push(from, to, type);
    else CLASS_LOW.fill(type, from, Math.min(to, LOW_PLANES - 1) + 1);
    if (from < LOW_PLANES && to >= LOW_PLANES) CLASS_HIGH.push(LOW_PLANES, to, type);
  }
}

/** The splitter's class of a code point (a lone surrogate is one: Control, as there). */
export function graphemeBreakClass(codePoint: number): number {
  if (codePoint < LOW_PLANES) return CLASS_LOW[codePoint] ?? OTHER;
  for (let r = 0; r < CLASS_HIGH.length; r += 3)
    if (codePoint >= (CLASS_HIGH[r] ?? 0) && codePoint <= (CLASS_HIGH[r + 1] ?? -1))
      return CLASS_HIGH[r + 2] ?? OTHER;
  return OTHER;
}

/**
 * Where the grapheme that begins at `start` (a code point's first unit) ends: the index of the
 * first unit after it, as the calculator's splitting has it. Linear in the grapheme's length.
 *
 * The facts kept, for the splitter's `shouldBreak(start, mid, next)` (`all` being the three
 * together): the first class, the last two, whether `mid` is empty, all Extend, has a regional
 * indicator, or begins with one with no other after a non-indicator; whether any Extend was seen.
 * (Its E_Modifier look-ahead can only hold for the code point being added, since when it held for
 * an earlier one it had broken there; its regional indicator one needs the indicators of `all`
 * to be `all[1..k]`.)
 */
export function graphemeEnd(text: string, start: number): number {
  let i = start;
  let code = text.charCodeAt(i);
  let size = 1;
  if (code >= 0xd800 && code <= 0xdbff) {
    const low = text.charCodeAt(i + 1);
    if (low >= 0xdc00 && low <= 0xdfff) {
      code = ((code - 0xd800) << 10) + (low - 0xdc00) + 0x10000;
      size = 2;
    }
  }
  const first = graphemeBreakClass(code);
  let previous = first;
  let beforePrevious = NONE;
  let midEmpty = true;
  let midAllExtend = true;
  let midHasIndicator = false;
  /** `mid` begins with a regional indicator, and has none after a code point that is not one. */
  let midLeadingIndicators = false;
  let indicatorRunOpen = false;
  let anyExtend = first === EXTEND;
  i += size;
  while (i < text.length) {
    code = text.charCodeAt(i);
    size = 1;
    if (code >= 0xd800 && code <= 0xdbff) {
      const low = text.charCodeAt(i + 1);
      if (low >= 0xdc00 && low <= 0xdfff) {
        code = ((code - 0xd800) << 10) + (low - 0xdc00) + 0x10000;
        size = 2;
      }
    }
    const next = graphemeBreakClass(code);
    if (
      breaksBefore(
        first,
        previous,
        beforePrevious,
        next,
        midEmpty,
        midAllExtend,
        midHasIndicator,
        midLeadingIndicators,
        anyExtend,
      )
    )
      return i;
    if (midEmpty) {
      midLeadingIndicators = next === REGIONAL_INDICATOR;
      indicatorRunOpen = midLeadingIndicators;
      midAllExtend = next === EXTEND;
      midEmpty = false;
    } else {
      if (next === REGIONAL_INDICATOR) {
        if (!indicatorRunOpen) midLeadingIndicators = false;
      } else indicatorRunOpen = false;
      if (next !== EXTEND) midAllExtend = false;
    }
    if (next === REGIONAL_INDICATOR) midHasIndicator = true;
    if (next === EXTEND) anyExtend = true;
    beforePrevious = previous;
    previous = next;
    i += size;
  }
  return text.length;
}

/** `shouldBreak` of grapheme-splitter 1.0.4, rule by rule in its order, on the facts kept. */
function breaksBefore(
  first: number,
  previous: number,
  beforePrevious: number,
  next: number,
  midEmpty: boolean,
  midAllExtend: boolean,
  midHasIndicator: boolean,
  midLeadingIndicators: boolean,
  anyExtend: boolean,
): boolean {
  // Look-ahead for GB10: a modifier after Extends that follow no emoji base.
  if (
    next === E_MODIFIER &&
    !midEmpty &&
    midAllExtend &&
    first !== EXTEND &&
    first !== E_BASE &&
    first !== E_BASE_GAZ
  )
    return true;
  // Look-ahead for GB12/13: the regional indicators of `all` are `all[1..k]`, and `previous` is
  // neither one nor Prepend.
  if (
    next === REGIONAL_INDICATOR
      ? midEmpty && first !== PREPEND && first !== REGIONAL_INDICATOR
      : midLeadingIndicators && previous !== PREPEND && previous !== REGIONAL_INDICATOR
  )
    return true;
  // GB3 keeps CR LF together, but the calculator cuts that grapheme in two; GB4, GB5.
  if (previous === CR || previous === LF || previous === CONTROL) return true;
  if (next === CONTROL || next === CR || next === LF) return true;
  // GB6, GB7, GB8: Hangul syllable sequences.
  if (previous === L && (next === L || next === V || next === LV || next === LVT)) return false;
  if ((previous === LV || previous === V) && (next === V || next === T)) return false;
  if ((previous === LVT || previous === T) && next === T) return false;
  // GB9, GB9a, GB9b.
  if (next === EXTEND || next === ZWJ || next === SPACING_MARK) return false;
  if (previous === PREPEND) return false;
  // GB10 as the splitter has it: the emoji base is right before the last Extend, or, with no
  // Extend at all, right before the modifier.
  if (
    next === E_MODIFIER &&
    (anyExtend
      ? previous === EXTEND && (beforePrevious === E_BASE || beforePrevious === E_BASE_GAZ)
      : previous === E_BASE || previous === E_BASE_GAZ)
  )
    return false;
  // GB11 of Unicode 10.
  if (previous === ZWJ && (next === GLUE_AFTER_ZWJ || next === E_BASE_GAZ)) return false;
  // GB12, GB13: at most one pair.
  if (midHasIndicator) return true;
  if (previous === REGIONAL_INDICATOR && next === REGIONAL_INDICATOR) return false;
  return true;
}
