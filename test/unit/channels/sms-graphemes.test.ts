import fc from "fast-check";
import { splitGraphemes } from "sms-segments-calculator/dist/libs/textUtils.js";
import { describe, expect, it } from "vitest";
import { graphemeBreakData, graphemeSplitterSource } from "../../../scripts/grapheme-break-data.js";
import { GRAPHEME_BREAK_DATA } from "../../../src/channels/sms/grapheme-break-data.js";
import { graphemeEnd } from "../../../src/channels/sms/graphemes.js";

/**
 * The graphemes of src/channels/sms/graphemes.ts against the calculator's own (`splitGraphemes`
 * of sms-segments-calculator: grapheme-splitter, then CR LF cut in two), on every class sequence
 * of up to four code points, random sequences, every BMP code point in a context that tells the
 * classes apart, and the long graphemes that cost the splitter n².
 */

function graphemes(text: string): string[] {
  const result: string[] = [];
  for (let start = 0; start < text.length; ) {
    const end = graphemeEnd(text, start);
    result.push(text.slice(start, end));
    start = end;
  }
  return result;
}

const expectSameGraphemes = (text: string) => expect(graphemes(text)).toEqual(splitGraphemes(text));

/** Two code points of each class (the first and the last of its ranges), and two of Other. */
const REPRESENTATIVES: Record<string, string[]> = {
  Other: ["a", "Ж"],
  ...Object.fromEntries(
    Object.entries(GRAPHEME_BREAK_DATA).map(([name, ranges]) => {
      const list = ranges.split(" ");
      const first = Number.parseInt(list[0]?.split("-")[0] ?? "", 16);
      const last = Number.parseInt(list.at(-1)?.split("-").at(-1) ?? "", 16);
      return [name, [String.fromCodePoint(first), String.fromCodePoint(last)]];
    }),
  ),
};
const ONE_PER_CLASS = Object.values(REPRESENTATIVES).map((chars) => chars[0] ?? "");
const ALL_REPRESENTATIVES = Object.values(REPRESENTATIVES).flat();

describe("graphemeEnd splits as the calculator does", () => {
  it("with the class table of the installed grapheme-splitter (scripts/grapheme-break-data.ts)", () => {
    expect(GRAPHEME_BREAK_DATA).toEqual(graphemeBreakData(graphemeSplitterSource()));
  });

  /** The texts of `chars` that differ, over every sequence of `chars` of `length` or fewer. */
  function differingSequences(chars: string[], length: number): string[] {
    const differ: string[] = [];
    const n = chars.length;
    for (let size = 1; size <= length; size++) {
      for (let k = 0; k < n ** size; k++) {
        let text = "";
        for (let j = 0, rest = k; j < size; j++, rest = Math.floor(rest / n)) text += chars[rest % n];
        if (JSON.stringify(graphemes(text)) !== JSON.stringify(splitGraphemes(text))) differ.push(text);
      }
    }
    return differ;
  }

  it("for every sequence of up to four classes", () => {
    expect(differingSequences(ONE_PER_CLASS, 4)).toEqual([]);
  });

  it("for every sequence of up to five of the classes that the emoji, mark and flag rules read", () => {
    const classes = ["Other", "Extend", "ZWJ", "SpacingMark", "Prepend", "Regional_Indicator", "E_Base"];
    const more = ["E_Modifier", "E_Base_GAZ", "Glue_After_Zwj"];
    const chars = [...classes, ...more].map((name) => REPRESENTATIVES[name]?.[0] ?? "");
    expect(differingSequences(chars, 5)).toEqual([]);
  });

  it("for random sequences of code points of every class", () => {
    fc.assert(
      fc.property(fc.array(fc.constantFrom(...ALL_REPRESENTATIVES), { maxLength: 40 }), (chars) => {
        expectSameGraphemes(chars.join(""));
      }),
      { numRuns: 3000 },
    );
  });

  it("for random sequences with lone surrogates", () => {
    const chars = fc.constantFrom(...ALL_REPRESENTATIVES, "\ud83d", "\ude00", "\ud83c", "\udffd");
    fc.assert(
      fc.property(fc.array(chars, { maxLength: 30 }), (list) => {
        expectSameGraphemes(list.join(""));
      }),
      { numRuns: 1000 },
    );
  });

  it("for every BMP code point, and the emoji planes', beside code points of each kind", () => {
    const differ: string[] = [];
    const check = (codePoint: number) => {
      if (codePoint >= 0xd800 && codePoint <= 0xdfff) return;
      const x = String.fromCodePoint(codePoint);
      // After a letter, itself, a modifier, a ZWJ, a leading and a trailing jamo, a Prepend.
      const text = `a${x}${x}\u{1f3fd}\u200d${x}\u1100${x}\u11a8\u0600${x}a`;
      if (JSON.stringify(graphemes(text)) !== JSON.stringify(splitGraphemes(text)))
        differ.push(codePoint.toString(16));
    };
    for (let codePoint = 0; codePoint <= 0xffff; codePoint++) check(codePoint);
    for (let codePoint = 0x1f000; codePoint <= 0x1faff; codePoint++) check(codePoint);
    for (let codePoint = 0xe0000; codePoint <= 0xe01ff; codePoint++) check(codePoint);
    expect(differ).toEqual([]);
  });

  it("for long graphemes: marks, Hangul jamo, Prepends, ZWJ chains, flags with marks", () => {
    const shapes = [
      `a${"\u0301".repeat(300)}b`,
      `a${"\u0300\u0301\u0302\u036f\u0903".repeat(60)}b`,
      `${"\u1100".repeat(100)}${"\u1160".repeat(100)}${"\u11a8".repeat(100)}a`,
      `${"\u0600".repeat(200)}a\u0301`,
      `${"\u2764\u200d".repeat(100)}\u{1f469}`,
      `\u{1f469}${"\u200d\u{1f469}\u{1f3fd}".repeat(60)}`,
      `\u{1f44d}\u0301\u{1f3fd}\u{1f44d}\u0301\u0301\u{1f3fd}`,
      `\u{1f1eb}\u{1f1f7}${"\u0301".repeat(50)}`,
      `\u0600\u{1f1eb}\u{1f1f7}${"\u{1f1eb}".repeat(41)}`,
      `\r\n\r\r\n\n${"\u0301".repeat(10)}`,
    ];
    for (const text of shapes) expectSameGraphemes(text);
  });
});
