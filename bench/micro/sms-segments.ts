/**
 * What counting an SMS body's segments costs the accept path (docs/decisions/0043): Twilio's own
 * calculator (`sms-segments-calculator`) against `smsSegments`, which counts in one pass the bodies
 * of GSM-7 characters only and the UCS-2 ones whose characters are each a grapheme of their own,
 * for the bodies the API mostly sees.
 * Usage: `npx tsx bench/micro/sms-segments.ts`
 */
import { librarySegments, smsSegments } from "../../src/channels/sms/segments.js";

const ITERATIONS = 20_000;
const sentence = "Your parcel 4711 arrives tomorrow between 9:00 and 12:00; reply STOP to opt out. ";
const BODIES: ReadonlyArray<[string, string]> = [
  ["OTP, 30 characters (GSM-7)", "Your ACME code is 123456. Bye."],
  ["160 characters (GSM-7)", sentence.repeat(2).slice(0, 160)],
  ["600 characters (GSM-7, €)", `${sentence.repeat(8)}Total: 12 €`.slice(-600)],
  ["OTP with an emoji (UCS-2)", "Your ACME code is 123456 🔐"],
  ["160 characters (UCS-2, Cyrillic)", "Ваш код подтверждения 123456. ".repeat(6).slice(0, 160)],
  ["600 characters (UCS-2)", `${sentence.repeat(8)}Merci ✓`.slice(-600)],
];

function measure(name: string, count: (body: string) => { segments: number }, body: string): void {
  let keep = 0;
  for (let i = 0; i < 2_000; i++) keep += count(body).segments; // warm up
  const started = process.hrtime.bigint();
  for (let i = 0; i < ITERATIONS; i++) keep += count(body).segments;
  const microseconds = Number(process.hrtime.bigint() - started) / ITERATIONS / 1000;
  console.log(
    `  ${name.padEnd(24)} ${microseconds.toFixed(3).padStart(9)} µs per body (${keep > 0 ? "ok" : "?"})`,
  );
}

for (const [name, body] of BODIES) {
  const { segments, encoding } = smsSegments(body);
  console.log(`${name}: ${body.length} UTF-16 units, ${segments} segment(s), ${encoding}`);
  measure("sms-segments-calculator", librarySegments, body);
  measure("smsSegments", smsSegments, body);
}
console.log(`node ${process.version}, V8 ${process.versions.v8}`);
