/**
 * What the accept path's sender check costs a request once its organization's senders are cached
 * (docs/decisions/0033): the channel's claim, the cache lookup and the awaited promise, for 100
 * organizations as the benchmark has them, against the same request with the check off. The
 * lookups themselves are one indexed query per organization per `AUTH_CACHE_TTL_MS` per process,
 * measured by `npm run bench` (accept-64 against accept-64-senders-off).
 * Usage: `npx tsx bench/micro/sender-check.ts`
 */
import { sms } from "../../src/channels/sms/index.js";
import { createVerifiedSenders } from "../../src/messages/verified-senders.js";
import { loadConfig } from "../../src/runtime/config.js";

const ITERATIONS = 1_000_000;
const config = loadConfig({ NODE_ENV: "test" });
const organizations = Array.from(
  { length: 100 },
  (_, i) => `0190a1b2-c3d4-7e5f-8a9b-${String(i).padStart(12, "0")}`,
);
const content = {
  channel: "sms" as const,
  recipient: "+14155550100",
  sender: "ACME",
  body: "Your code is 123456",
};

async function measure(name: string, required: boolean): Promise<void> {
  const senders = createVerifiedSenders({
    load: async () => ["sms_sender:ACME"],
    now: () => new Date(),
    ttlMs: 3_600_000,
    required,
  });
  let refused = 0;
  const check = async (i: number) => {
    if (!senders.required) return;
    const claim = sms.sender?.(content, config);
    if ((await senders.refusal(organizations[i % 100] ?? "", claim)) !== undefined) refused++;
  };
  for (let i = 0; i < 100_000; i++) await check(i); // warm up, and every organization cached
  const started = process.hrtime.bigint();
  for (let i = 0; i < ITERATIONS; i++) await check(i);
  const microseconds = Number(process.hrtime.bigint() - started) / ITERATIONS / 1000;
  console.log(`${name.padEnd(32)} ${microseconds.toFixed(3)} µs per request (${refused} refused)`);
}

await measure("SENDER_VERIFICATION=off", false);
await measure("SENDER_VERIFICATION=required", true);
await measure("SENDER_VERIFICATION=off", false);
await measure("SENDER_VERIFICATION=required", true);
