import fc from "fast-check";
import { SegmentedMessage } from "sms-segments-calculator";
import { describe, expect, it } from "vitest";
import { STANDALONE_UCS2_RANGES, smsSegments } from "../../../src/channels/sms/segments.js";
import { librarySegments } from "../../support/sms-calculator.js";

/**
 * An SMS body's encoding and segment count, against Twilio's documented rules and examples
 * (twilio.com/docs/glossary/what-sms-character-limit, /what-is-gsm-7-character-encoding,
 * /what-is-ucs-2-character-encoding) and against Twilio's own calculator, the reference for
 * every count: the one-pass ones and the grapheme by grapheme one (test/unit/channels/
 * sms-graphemes.test.ts holds its graphemes to the calculator's).
 */

/** GSM 03.38, written out here again rather than imported: the test's own reading of the standard. */
const GSM_BASIC = [
  ..."@£$¥èéùìòÇ\nØø\rÅåΔ_ΦΓΛΩΠΨΣΘΞÆæßÉ !\"#¤%&'()*+,-./0123456789:;<=>?",
  ..."¡ABCDEFGHIJKLMNOPQRSTUVWXYZÄÖÑÜ§¿abcdefghijklmnopqrstuvwxyzäöñüà",
];
const GSM_EXTENSION = [..."\f^{}\\[~]|€"];
/** Outside GSM-7, each alone or as part of a grapheme: accents GSM lacks, other scripts, emoji. */
const NOT_GSM = [
  "á",
  "ç",
  "Ж",
  "ש",
  "中",
  "`",
  "\t",
  "’",
  "“",
  "…",
  "e\u0301",
  "😀",
  "🔐",
  "👍🏽",
  "👨‍👩‍👧",
  "🇫🇷",
  "❤️",
  "1️⃣",
];

const expectCount = (body: string, segments: number, encoding: "GSM-7" | "UCS-2") =>
  expect(smsSegments(body)).toEqual({ segments, encoding });

describe("smsSegments: Twilio's documented examples", () => {
  it('"Hello world" is GSM-7, one segment', () => {
    expectCount("Hello world", 1, "GSM-7");
  });

  it("160 GSM-7 characters are one segment; 161 are two", () => {
    expectCount("a".repeat(160), 1, "GSM-7");
    expectCount("a".repeat(161), 2, "GSM-7");
  });

  it("a concatenated segment holds 153: 306 characters are two segments, 307 three", () => {
    expectCount("a".repeat(306), 2, "GSM-7");
    expectCount("a".repeat(307), 3, "GSM-7");
  });

  it("€ and [ ] { } are GSM-7 but count two septets each: 80 € are one segment, 81 two", () => {
    expectCount("€".repeat(80), 1, "GSM-7");
    expectCount("€".repeat(81), 2, "GSM-7");
    expectCount("[]{}".repeat(20), 1, "GSM-7");
    expectCount(`${"[]{}".repeat(20)}x`, 2, "GSM-7");
    expectCount(`${"a".repeat(158)}€`, 1, "GSM-7");
    expectCount(`${"a".repeat(159)}€`, 2, "GSM-7");
  });

  it("an extension character is never split across segments: it starts the next one", () => {
    // 152 septets, then € (2) would make 154 > 153: the first segment ends at 152.
    expectCount(`${"a".repeat(152)}€${"a".repeat(151)}`, 2, "GSM-7");
    expectCount(`${"a".repeat(152)}€${"a".repeat(152)}`, 3, "GSM-7");
  });

  it("one emoji makes the whole body UCS-2", () => {
    expectCount("Hello world 😀", 1, "UCS-2");
    expectCount(`${"a".repeat(60)}😀`, 1, "UCS-2");
    expectCount(`${"a".repeat(160)}😀`, 3, "UCS-2");
  });

  it("70 UCS-2 units are one segment; 71 are two; 134 two and 135 three", () => {
    expectCount("Ж".repeat(70), 1, "UCS-2");
    expectCount("Ж".repeat(71), 2, "UCS-2");
    expectCount("Ж".repeat(134), 2, "UCS-2");
    expectCount("Ж".repeat(135), 3, "UCS-2");
  });

  it("an emoji counts two UCS-2 units and is never split across segments", () => {
    expectCount("😀".repeat(35), 1, "UCS-2");
    expectCount(`${"😀".repeat(35)}a`, 2, "UCS-2");
    // 66 units, then an emoji (2) would make 68 > 67: it starts the second segment.
    expectCount(`${"Ж".repeat(66)}😀${"Ж".repeat(65)}`, 2, "UCS-2");
    expectCount(`${"Ж".repeat(66)}😀${"Ж".repeat(66)}`, 3, "UCS-2");
  });

  it("in a UCS-2 body, GSM-7 characters (extension ones too) count one unit each", () => {
    expectCount(`${"€".repeat(69)}Ж`, 1, "UCS-2");
    expectCount(`${"{".repeat(70)}Ж`, 2, "UCS-2");
  });

  it("the largest body the API takes (1600 characters) in each alphabet", () => {
    expectCount("a".repeat(1600), 11, "GSM-7");
    // 76 € to a segment (152 septets: a 77th would straddle the 153rd), so 22 rather than 3200 / 153.
    expectCount("€".repeat(1600), 22, "GSM-7");
    expectCount("Ж".repeat(1600), 24, "UCS-2");
  });

  it("a character GSM-7 lacks, such as a curly apostrophe, makes the body UCS-2 (no smart encoding)", () => {
    expectCount("It’s here", 1, "UCS-2");
    expectCount("It's here", 1, "GSM-7");
  });
});

describe("smsSegments agrees with Twilio's calculator", () => {
  it("for every BMP character alone: the one-pass count knows exactly the calculator's GSM-7", () => {
    const disagreements: string[] = [];
    for (let code = 0; code <= 0xffff; code++) {
      if (code >= 0xd800 && code <= 0xdfff) continue; // a lone surrogate never reaches it (400)
      const body = String.fromCharCode(code);
      if (JSON.stringify(smsSegments(body)) !== JSON.stringify(librarySegments(body)))
        disagreements.push(code.toString(16));
    }
    expect(disagreements).toEqual([]);
  });

  const gsm = fc.constantFrom(...GSM_BASIC, ...GSM_EXTENSION);
  const notGsm = fc.constantFrom(...NOT_GSM);
  const property = (body: fc.Arbitrary<string>) =>
    fc.assert(
      fc.property(body, (text) => {
        expect(smsSegments(text)).toEqual(librarySegments(text));
      }),
      { numRuns: 300 },
    );

  it("for random strings of GSM-7 basic and extension characters, around the segment boundaries", () => {
    property(fc.array(gsm, { maxLength: 480 }).map((chars) => chars.join("")));
  });

  it("for random strings mostly of extension characters (two septets each)", () => {
    property(
      fc
        .array(fc.oneof({ arbitrary: fc.constantFrom(...GSM_EXTENSION), weight: 3 }, gsm), { maxLength: 330 })
        .map((chars) => chars.join("")),
    );
  });

  it("for GSM-7 strings with characters outside it and emoji mixed in", () => {
    property(
      fc
        .array(fc.oneof({ arbitrary: gsm, weight: 20 }, notGsm), { maxLength: 300 })
        .map((chars) => chars.join("")),
    );
  });

  it("for random Unicode text", () => {
    property(fc.string({ unit: "grapheme", maxLength: 200 }));
  });

  const standalone = fc
    .constantFrom(...STANDALONE_UCS2_RANGES)
    .chain(([first, last]) => fc.integer({ min: first, max: last }))
    .map((codePoint) => String.fromCodePoint(codePoint));
  /** Characters that join their neighbours into one grapheme: counted grapheme by grapheme. */
  const joining = fc.constantFrom(
    "\u0301", // combining acute accent
    "\u200d", // zero-width joiner
    "\ufe0f", // variation selector 16
    "\u{1f3fd}", // emoji modifier (skin tone)
    "\u{1f1eb}\u{1f1f7}", // a flag: two regional indicators
    "\u0e31", // Thai vowel sign
    "\u1100", // Hangul leading jamo
    "\u0600", // Arabic prepended number sign
  );

  it("for random strings of characters that are graphemes of their own (the one-pass UCS-2 count)", () => {
    property(
      fc
        .array(fc.oneof({ arbitrary: standalone, weight: 5 }, gsm), { maxLength: 300 })
        .map((chars) => chars.join("")),
    );
  });

  it("for such strings with joining characters mixed in (the grapheme by grapheme count)", () => {
    property(
      fc
        .array(fc.oneof({ arbitrary: standalone, weight: 20 }, { arbitrary: gsm, weight: 5 }, joining), {
          maxLength: 300,
        })
        .map((chars) => chars.join("")),
    );
  });

  /** Code points that join their neighbours, one at a time, from the ranges they come in. */
  const joiningCodePoint = fc.oneof(
    fc.integer({ min: 0x0300, max: 0x036f }).map((c) => String.fromCodePoint(c)), // combining marks
    fc.constantFrom("\u200d", "\ufe0f", "\u20e3", "\u0600", "\u093e", "\u0e31"), // ZWJ, VS16, keycap, Prepend, SpacingMark
    fc.integer({ min: 0x1f3fb, max: 0x1f3ff }).map((c) => String.fromCodePoint(c)), // skin tones
    fc.integer({ min: 0x1f1e6, max: 0x1f1ff }).map((c) => String.fromCodePoint(c)), // regional indicators
    fc.integer({ min: 0x1100, max: 0x11ff }).map((c) => String.fromCodePoint(c)), // Hangul jamo
  );
  /** Whole sequences that the calculator keeps as one grapheme, or not quite. */
  const joinedSequence = fc.constantFrom(
    "\u{1f468}\u200d\u{1f469}\u200d\u{1f467}", // family
    "\u{1f469}\u{1f3fd}\u200d\u{1f4bb}", // technologist, skin tone
    "\u{1f3f3}\ufe0f\u200d\u{1f308}", // rainbow flag
    "\u2764\ufe0f\u200d\u{1f525}", // heart on fire (Unicode 13: two graphemes for the calculator)
    "\u{1f44d}\u{1f3fd}", // thumbs up, skin tone
    "\u{1f1eb}\u{1f1f7}", // flag
    "1\ufe0f\u20e3", // keycap
    "\u1100\u1161\u11a8", // Hangul syllable in jamo
    "e\u0301\u0323", // letter with two marks
  );
  const ordinary = fc.oneof(
    { arbitrary: standalone, weight: 3 },
    { arbitrary: gsm, weight: 3 },
    { arbitrary: fc.constantFrom("Ж", "é", "中", "\u{1f600}"), weight: 2 },
  );
  const mixed = fc.oneof(
    { arbitrary: ordinary, weight: 6 },
    { arbitrary: joiningCodePoint, weight: 3 },
    { arbitrary: joinedSequence, weight: 2 },
  );

  it("for text mixing joining code points and sequences with ordinary characters", () => {
    property(fc.array(mixed, { maxLength: 400 }).map((chars) => chars.join("")));
  });

  it("for such text placed across the segment boundaries (70, 67, 134, 201 units)", () => {
    property(
      fc
        .tuple(
          fc.constantFrom(60, 63, 64, 65, 66, 67, 68, 69, 70, 130, 131, 132, 133, 134, 198, 199, 200, 201),
          fc.array(mixed, { maxLength: 12 }),
          fc.array(ordinary, { maxLength: 80 }),
        )
        .map(([units, joined, rest]) => {
          const tail = joined.join("");
          return `${"Ж".repeat(Math.max(0, units - Math.floor(tail.length / 2)))}${tail}${rest.join("")}`;
        }),
    );
  });

  // The calculator gives a grapheme longer than a segment one of its own however long it is; a
  // segment holds 67 UCS-2 units, so the count is at least that bound (and otherwise the calculator's).
  const billed = (text: string) => {
    const { segments, encoding } = librarySegments(text);
    return { segments: Math.max(segments, text.length > 70 ? Math.ceil(text.length / 67) : 1), encoding };
  };

  it("for graphemes longer than a segment, where they fall, but never fewer segments than the units need", () => {
    fc.assert(
      fc.property(
        fc
          .tuple(
            fc.integer({ min: 0, max: 140 }),
            fc.integer({ min: 60, max: 150 }),
            fc.integer({ min: 0, max: 140 }),
          )
          .map(
            ([before, marks, after]) => `${"Ж".repeat(before)}a${"\u0301".repeat(marks)}${"Ж".repeat(after)}`,
          ),
        (text) => {
          expect(smsSegments(text)).toEqual(billed(text));
        },
      ),
      { numRuns: 300 },
    );
    expect(smsSegments(`a${"\u0301".repeat(1599)}`)).toEqual({ segments: 24, encoding: "UCS-2" });
    expect(librarySegments(`a${"\u0301".repeat(1599)}`).segments).toBe(2);
  });

  it("for the largest bodies of joining code points (1,600 units), the shapes that cost the calculator most", () => {
    const bodies = [
      `a${"\u0301".repeat(1599)}`,
      "\u0301".repeat(1600),
      `a${"\u0300\u0301\u0302\u0303".repeat(400)}`.slice(0, 1600),
      "\u{1f1eb}\u{1f1f7}".repeat(400),
      `a${"\u{1f1e6}".repeat(799)}b`,
      "\u{1f468}\u200d\u{1f469}\u200d\u{1f467}".repeat(200),
      `${"\u2764\u200d".repeat(799)}\u2764`,
      `\u{1f469}${"\u200d\u{1f469}".repeat(533)}`,
      "\u1100".repeat(1600),
      `${"\u1100".repeat(533)}${"\u1161".repeat(533)}${"\u11a8".repeat(534)}`,
      "\u0600".repeat(1600),
      "\u093e".repeat(1600),
      "Ваш код подтверждения е\u0301. ".repeat(60).slice(0, 1600),
      "\u0301Ж".repeat(800),
    ];
    for (const body of bodies) expect(smsSegments(body)).toEqual(billed(body));
  });

  it("for every character the one-pass UCS-2 count takes: the calculator splits it off as a grapheme of its own", () => {
    const joined: string[] = [];
    for (const [first, last] of STANDALONE_UCS2_RANGES) {
      for (let codePoint = first; codePoint <= last; codePoint++) {
        const char = String.fromCodePoint(codePoint);
        // Before and after a letter, itself, and an emoji that takes modifiers: six graphemes
        // unless it extends, prepends, pairs with itself or modifies (CR and LF are split apart
        // by the calculator itself).
        const graphemes = new SegmentedMessage(`a${char}${char}\u{1f44d}${char}a`).graphemes;
        if (graphemes.length !== 6) joined.push(codePoint.toString(16));
      }
    }
    expect(joined).toEqual([]);
  });
});
