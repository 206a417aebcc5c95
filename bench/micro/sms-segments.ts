/**
 * What counting an SMS body's segments costs the accept path (docs/decisions/0043): Twilio's own
 * calculator (`sms-segments-calculator`) against `smsSegments`, which counts in one pass the bodies
 * of GSM-7 characters only and the UCS-2 ones whose characters are each a grapheme of their own,
 * and any other grapheme by grapheme; for the bodies the API mostly sees, then for the largest
 * bodies (1,600 UTF-16 units) of the characters that join their neighbours, which cost the
 * calculator's grapheme splitter most.
 * Usage: `npx tsx bench/micro/sms-segments.ts`
 */
import { smsSegments } from "../../src/channels/sms/segments.js";
import { librarySegments } from "../../test/support/sms-calculator.js";

/** Each count is repeated until it has run this long (in batches, the clock read between them). */
const BUDGET_NS = 300_000_000n;
const sentence = "Your parcel 4711 arrives tomorrow between 9:00 and 12:00; reply STOP to opt out. ";
const cyrillic = "Ваш код подтверждения 123456. ";
const BODIES: ReadonlyArray<[string, string]> = [
  ["OTP, 30 characters (GSM-7)", "Your ACME code is 123456. Bye."],
  ["160 characters (GSM-7)", sentence.repeat(2).slice(0, 160)],
  ["600 characters (GSM-7, €)", `${sentence.repeat(8)}Total: 12 €`.slice(-600)],
  ["OTP with an emoji (UCS-2)", "Your ACME code is 123456 🔐"],
  ["160 characters (UCS-2, Cyrillic)", cyrillic.repeat(6).slice(0, 160)],
  ["600 characters (UCS-2)", `${sentence.repeat(8)}Merci ✓`.slice(-600)],
  ["OTP with a thumbs-up and skin tone (UCS-2)", "Your ACME code is 123456 👍🏽"],
  [
    "160 characters, two combining accents (UCS-2)",
    `Cafe\u0301 cre\u0300me: ${cyrillic.repeat(6)}`.slice(0, 160),
  ],
  // The largest bodies (1,600 UTF-16 units) of joining characters.
  ["1,600 units: a letter and 1,599 combining marks", `a${"\u0301".repeat(1599)}`],
  ["1,600 units: Cyrillic, a combining mark every other letter", "Ж\u0301".repeat(800)],
  ["1,600 units: Cyrillic with a few combining marks", `${cyrillic}е\u0301 `.repeat(60).slice(0, 1600)],
  ["1,600 units: 400 flags (regional indicators)", "\u{1f1eb}\u{1f1f7}".repeat(400)],
  ["1,600 units: 200 family ZWJ sequences", "\u{1f468}\u200d\u{1f469}\u200d\u{1f467}".repeat(200)],
  ["1,600 units: one ZWJ chain of 800 hearts", "\u2764\u200d".repeat(800)],
  ["1,600 units: Hangul leading jamo", "\u1100".repeat(1600)],
];

function measure(name: string, count: (body: string) => { segments: number }, body: string): void {
  let keep = 0;
  for (let i = 0; i < 20; i++) keep += count(body).segments; // warm up
  let iterations = 0;
  let batch = 1;
  const started = process.hrtime.bigint();
  let elapsed = 0n;
  while (elapsed < BUDGET_NS) {
    for (let i = 0; i < batch; i++) keep += count(body).segments;
    iterations += batch;
    batch *= 2;
    elapsed = process.hrtime.bigint() - started;
  }
  const microseconds = Number(elapsed) / iterations / 1000;
  console.log(
    `  ${name.padEnd(24)} ${microseconds.toFixed(3).padStart(10)} µs per body (${keep > 0 ? "ok" : "?"})`,
  );
}

for (const [name, body] of BODIES) {
  const { segments, encoding } = smsSegments(body);
  const reference = librarySegments(body);
  const agrees = reference.segments === segments && reference.encoding === encoding;
  console.log(
    `${name}: ${body.length} UTF-16 units, ${segments} segment(s), ${encoding}${agrees ? "" : " (the calculator disagrees!)"}`,
  );
  measure("sms-segments-calculator", librarySegments, body);
  measure("smsSegments", smsSegments, body);
}
console.log(`node ${process.version}, V8 ${process.versions.v8}`);
