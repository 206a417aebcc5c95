/**
 * What signing one status webhook costs the CPU (docs/decisions/0050): the service's
 * `WebhookSigner` (node:crypto's HMAC, one kept per secret, as the dispatcher does) beside the
 * standard's own library (`standardwebhooks`, pure-JS HMAC-SHA256 from `fast-sha256`), with a
 * `Webhook` built per signature and one kept per secret (checked to give the same signature). A
 * body of the size the dispatcher sends for a final event. Usage: `npx tsx bench/micro/webhook-sign.ts`
 */
import { randomBytes } from "node:crypto";
import { Webhook } from "standardwebhooks";
import { WebhookSigner } from "../../src/runtime/webhook-signature.js";

const ITERATIONS = 50_000;
const secret = `whsec_${randomBytes(32).toString("base64")}`;
const at = new Date();
const body = JSON.stringify({
  type: "message.succeeded",
  timestamp: at.toISOString(),
  data: {
    message_id: "0193a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b",
    organization_id: "0193a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5c",
    seq: 3,
    channel: "sms",
    priority: "critical",
    notification_type: "OTP",
    status: "succeeded",
    retry_count: 0,
    occurred_at: at.toISOString(),
    provider: { name: "simulator", message_id: "sim_0193a1b2c3d47e5f" },
  },
});
const ids = Array.from(
  { length: 1000 },
  (_, i) => `evt_0193a1b2-c3d4-7e5f-8a9b-0c1d2e3f${String(i).padStart(4, "0")}_3`,
);

const kept = new Webhook(secret);
const signer = new WebhookSigner(secret);
const nodeSign = (id: string) => signer.sign(id, at, body);
if (nodeSign(ids[0] as string) !== kept.sign(ids[0] as string, at, body))
  throw new Error("signatures differ");

const cases: Record<string, (id: string) => string> = {
  "standardwebhooks, a Webhook per signature": (id) => new Webhook(secret).sign(id, at, body),
  "standardwebhooks, one Webhook per secret": (id) => kept.sign(id, at, body),
  "WebhookSigner (node:crypto), one per secret": nodeSign,
};

console.log(`body ${Buffer.byteLength(body)} bytes, ${ITERATIONS} signatures per case, best of 3 rounds`);
for (const [name, sign] of Object.entries(cases)) {
  let best = Number.POSITIVE_INFINITY;
  for (let round = 0; round < 3; round++) {
    const started = process.cpuUsage();
    let length = 0;
    for (let i = 0; i < ITERATIONS; i++) length += sign(ids[i % ids.length] as string).length;
    const used = process.cpuUsage(started);
    if (length === 0) throw new Error("nothing signed");
    best = Math.min(best, (used.user + used.system) / ITERATIONS);
  }
  console.log(`${name.padEnd(44)} ${best.toFixed(2)} µs CPU per signature`);
}
