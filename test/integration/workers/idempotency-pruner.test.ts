import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { IDEMPOTENCY_WINDOW_MS } from "../../../src/store/accept-batcher.js";
import { PRUNE_MARGIN_MS, pruneIdempotencyKeys } from "../../../workers/idempotency-pruner.js";
import { createHarness, onboard, sendSms } from "../../support/harness.js";

const h = createHarness();
const HOUR = 60 * 60 * 1000;
let organizationId = "";
let apiKey = "";

beforeAll(async () => {
  ({ id: organizationId, apiKey } = await onboard(h));
});
afterAll(() => h.close());

/** Claims for this file's organization, created `ageMs` before `now`; returns their keys. */
async function claimsAged(ageMs: number, count: number, now = new Date()): Promise<string[]> {
  const rows = Array.from({ length: count }, () => ({
    organization_id: organizationId,
    key: `aged-${randomUUID()}`,
    request_hash: "0".repeat(64),
    message_id: randomUUID(),
    created_at: new Date(now.getTime() - ageMs).toISOString(),
  }));
  await h.sql`insert into idempotency_keys ${h.sql(rows)}`;
  return rows.map((row) => row.key);
}

async function remaining(keys: string[]): Promise<string[]> {
  const rows = await h.sql<Array<{ key: string }>>`
    select key from idempotency_keys where organization_id = ${organizationId} and key = any(${keys})`;
  return rows.map((row) => row.key).sort();
}

const smsBody = { payload: { to: "+14155550100", body: "Your code is 123456" } };

describe("pruning expired Idempotency-Key claims", () => {
  it("deletes the keys past their window and the margin, and no other", async () => {
    const now = new Date();
    const [beyond] = await claimsAged(IDEMPOTENCY_WINDOW_MS + PRUNE_MARGIN_MS + HOUR, 1, now);
    const [withinMargin] = await claimsAged(IDEMPOTENCY_WINDOW_MS + PRUNE_MARGIN_MS / 2, 1, now);
    const [live] = await claimsAged(IDEMPOTENCY_WINDOW_MS - HOUR, 1, now);
    const [fresh] = await claimsAged(0, 1, now);
    const all = [beyond, withinMargin, live, fresh] as string[];

    const deleted = await pruneIdempotencyKeys(h.sql, { now });

    expect(deleted).toBe(1);
    expect(await remaining(all)).toEqual([withinMargin, live, fresh].sort());
  });

  it("deletes batch after batch until none is left", async () => {
    const keys = await claimsAged(IDEMPOTENCY_WINDOW_MS + 2 * PRUNE_MARGIN_MS, 25);

    const deleted = await pruneIdempotencyKeys(h.sql, { now: new Date(), batchSize: 10 });

    expect(deleted).toBe(25);
    expect(await remaining(keys)).toEqual([]);
  });

  // Another file's keys are never this old, so the keys each test ages are all there is to prune.
  it("stops after maxBatches statements and leaves the rest to the next call", async () => {
    const keys = await claimsAged(IDEMPOTENCY_WINDOW_MS + 2 * PRUNE_MARGIN_MS, 25);

    expect(await pruneIdempotencyKeys(h.sql, { now: new Date(), batchSize: 10, maxBatches: 2 })).toBe(20);
    expect(await remaining(keys)).toHaveLength(5);
    expect(await pruneIdempotencyKeys(h.sql, { now: new Date(), batchSize: 10, maxBatches: 2 })).toBe(5);
    expect(await remaining(keys)).toEqual([]);
  });

  it("runs from two workers at once, each key deleted by one of them", async () => {
    const keys = await claimsAged(IDEMPOTENCY_WINDOW_MS + 2 * PRUNE_MARGIN_MS, 40);

    const counts = await Promise.all([
      pruneIdempotencyKeys(h.sql, { now: new Date(), batchSize: 10 }),
      pruneIdempotencyKeys(h.sql, { now: new Date(), batchSize: 10 }),
    ]);

    expect(counts[0] + counts[1]).toBe(40);
    expect(await remaining(keys)).toEqual([]);
  });

  it("leaves a live key answering replays, and a pruned key can start a new message", async () => {
    const liveKey = `live-${randomUUID()}`;
    const prunedKey = `pruned-${randomUUID()}`;
    const first = async (key: string) => {
      const response = await sendSms(h, apiKey, smsBody, { "Idempotency-Key": key });
      expect(response.status).toBe(202);
      return ((await response.json()) as { request_id: string }).request_id;
    };
    const liveId = await first(liveKey);
    const prunedId = await first(prunedKey);
    await h.sql`
      update idempotency_keys set created_at = created_at - ${IDEMPOTENCY_WINDOW_MS - HOUR}::integer * interval '1 millisecond'
      where organization_id = ${organizationId} and key = ${liveKey}`;
    await h.sql`
      update idempotency_keys set created_at = created_at - ${IDEMPOTENCY_WINDOW_MS + 2 * PRUNE_MARGIN_MS}::integer * interval '1 millisecond'
      where organization_id = ${organizationId} and key = ${prunedKey}`;

    await pruneIdempotencyKeys(h.sql, { now: new Date() });

    expect(await remaining([liveKey, prunedKey])).toEqual([liveKey]);
    const replay = await sendSms(h, apiKey, smsBody, { "Idempotency-Key": liveKey });
    expect(replay.status).toBe(202);
    expect(replay.headers.get("Idempotent-Replayed")).toBe("true");
    expect(((await replay.json()) as { request_id: string }).request_id).toBe(liveId);
    const reused = await sendSms(
      h,
      apiKey,
      { payload: { ...smsBody.payload, body: "Another" } },
      {
        "Idempotency-Key": prunedKey,
      },
    );
    expect(reused.status).toBe(202);
    expect(reused.headers.get("Idempotent-Replayed")).toBeNull();
    expect(((await reused.json()) as { request_id: string }).request_id).not.toBe(prunedId);
  });
});
