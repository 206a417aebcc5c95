/**
 * What sealing and opening a message's content costs the CPU, apart from everything else: the
 * accept path seals each message (split, JSON, AES-256-GCM, one HMAC per recipient), the worker
 * and the reads open it (AES-256-GCM, JSON). The keys are in the cache, as on every request after
 * an organization's first. Usage: `npx tsx bench/micro/content-seal.ts`
 */
import { randomUUID } from "node:crypto";
import type { MessageContent } from "../../src/domain/events.js";
import { indexKeyOf, newDataKey } from "../../src/runtime/content-crypto.js";
import { ContentVault, storedContent } from "../../src/store/content.js";
import type { DataKey, DataKeys } from "../../src/store/data-keys.js";

const ITERATIONS = 50_000;
const organizationId = randomUUID();
const raw = newDataKey();
const key: DataKey = { id: randomUUID(), organizationId, key: raw, indexKey: indexKeyOf(raw) };
// The cache's answers, without a database: what DataKeys gives once a key is loaded.
const keys = {
  current: () => key,
  cached: (id: string) => (id === key.id ? key : undefined),
  load: async () => new Map([[key.id, key]]),
} as unknown as DataKeys;
const vault = new ContentVault(keys);

const contents = Array.from(
  { length: 200 },
  (_, i): MessageContent => ({
    id: randomUUID(),
    organizationId,
    productId: "bench",
    channel: "sms",
    priority: "critical",
    notificationType: "OTP",
    retryEnabled: true,
    recipient: `+1415555${String(i).padStart(4, "0")}`,
    sender: "ACME",
    expiresAt: new Date().toISOString(),
    body: `Your code is ${100000 + i}`,
  }),
);

async function main() {
  const sealed = await Promise.all(contents.map((content) => vault.seal({ ...content })));
  const opener = await vault.opener(sealed.map((s) => s.sealed));

  let started = process.hrtime.bigint();
  for (let i = 0; i < ITERATIONS; i++) await vault.seal({ ...(contents[i % 200] as MessageContent) });
  const sealUs = Number(process.hrtime.bigint() - started) / ITERATIONS / 1000;

  let opened = 0;
  started = process.hrtime.bigint();
  for (let i = 0; i < ITERATIONS; i++) {
    const s = sealed[i % 200];
    if (!s) continue;
    const content = storedContent(s.clear, s.sealed, s.recipientKeys, opener);
    if (content.recipient) opened++;
  }
  const openUs = Number(process.hrtime.bigint() - started) / ITERATIONS / 1000;
  console.log(`seal an SMS's content (split, JSON, AES-256-GCM, blind index): ${sealUs.toFixed(2)} µs`);
  console.log(
    `open it (AES-256-GCM, JSON, merge):                           ${openUs.toFixed(2)} µs (${opened})`,
  );
}

void main();
