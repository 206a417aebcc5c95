import type { Queue } from "bullmq";
import { eq, sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { deliveryOutbox } from "../../../db/schema.js";
import type { DeliveryJobData } from "../../../src/store/delivery-queue.js";
import { relayOutboxOnce } from "../../../workers/outbox-relay.js";
import { createHarness, onboard, sendSms, silentLogger, unreachableQueue } from "../../support/harness.js";

/** No worker runs here: the tests run the relay's passes themselves. */
const h = createHarness();
const other = createHarness();
let apiKey = "";
let otherKey = "";
beforeAll(async () => {
  [apiKey, otherKey] = await Promise.all([
    onboard(h).then((o) => o.apiKey),
    onboard(other).then((o) => o.apiKey),
  ]);
});
afterAll(() => Promise.all([h.close(), other.close()]));

async function accept(notificationType?: string, harness = h, key = apiKey): Promise<string> {
  const response = await sendSms(harness, key, {
    payload: { to: "+14155550100", body: "relayed" },
    ...(notificationType ? { notification_type: notificationType } : {}),
  });
  expect(response.status).toBe(202);
  return ((await response.json()) as { request_id: string }).request_id;
}

async function outboxRows(prefix: string): Promise<number> {
  const [row] = await h.db
    .select({ n: sql<number>`count(*)::int` })
    .from(deliveryOutbox)
    .where(eq(deliveryOutbox.queuePrefix, prefix));
  return row?.n ?? 0;
}

const relay = (options: { batchSize?: number; queue?: Queue<DeliveryJobData> } = {}) =>
  relayOutboxOnce({
    sql: h.sql,
    queue: options.queue ?? h.queue,
    logger: silentLogger,
    batchSize: options.batchSize,
  });

describe("outbox relay", () => {
  it("given accepted messages, when the relay runs, then each job is added once with its tier's priority and the outbox is emptied", async () => {
    const ids = [await accept("OTP"), await accept(), await accept("NEWS_UPDATE")];
    expect(await outboxRows(h.config.QUEUE_PREFIX)).toBe(3);

    expect(await relay()).toBe(3);

    expect(await outboxRows(h.config.QUEUE_PREFIX)).toBe(0);
    const jobs = await Promise.all(ids.map((id) => h.queue.getJob(id)));
    expect(jobs.map((job) => job?.opts.priority)).toEqual([1, 3, 4]);
    expect(jobs.map((job) => job?.data.messageId)).toEqual(ids);
    // A second pass finds nothing to move and adds nothing.
    expect(await relay()).toBe(0);
    expect(await h.queue.getJobCountByTypes("prioritized", "waiting")).toBe(3);
    await h.queue.obliterate({ force: true });
  });

  it("given a backlog, when the relay moves one at a time, then the most urgent message goes first", async () => {
    await accept("NEWS_UPDATE");
    await accept();
    const otp = await accept("OTP");

    expect(await relay({ batchSize: 1 })).toBe(1);

    expect(await h.queue.getJob(otp)).toBeDefined();
    expect(await h.queue.getJobCountByTypes("prioritized", "waiting")).toBe(1);
    expect(await relay()).toBe(2);
    await h.queue.obliterate({ force: true });
  });

  it("given a low backlog and an OTP, when the critical lane runs, then it moves only the OTP", async () => {
    const low = await accept("NEWS_UPDATE");
    const otp = await accept("OTP");

    expect(await relayOutboxOnce({ sql: h.sql, queue: h.queue, logger: silentLogger, maxPriority: 1 })).toBe(
      1,
    );

    expect(await h.queue.getJob(otp)).toBeDefined();
    expect(await h.queue.getJob(low)).toBeUndefined();
    expect(await relay()).toBe(1);
    await h.queue.obliterate({ force: true });
  });

  it("given Redis failing, when the relay runs, then it fails and every row waits for the next pass", async () => {
    const id = await accept();
    const { queue: deadQueue, close: closeDeadQueue } = unreachableQueue(h.config.QUEUE_PREFIX);
    try {
      await expect(relay({ queue: deadQueue })).rejects.toThrow();
    } finally {
      await closeDeadQueue();
    }

    expect(await outboxRows(h.config.QUEUE_PREFIX)).toBe(1);
    expect(await relay()).toBe(1);
    expect(await h.queue.getJob(id)).toBeDefined();
    await h.queue.obliterate({ force: true });
  });

  it("given relays running at once, then every message is moved exactly once", async () => {
    const ids = await Promise.all(Array.from({ length: 30 }, () => accept()));

    const moved = await Promise.all(Array.from({ length: 4 }, () => relay({ batchSize: 5 })));
    const rest = await relay();

    expect(moved.reduce((a, b) => a + b, 0) + rest).toBe(30);
    const jobs = await Promise.all(ids.map((id) => h.queue.getJob(id)));
    expect(jobs.every((job) => job !== undefined)).toBe(true);
    await h.queue.obliterate({ force: true });
  });

  it("given messages accepted for another queue prefix, then the relay leaves them to that queue's relay", async () => {
    const theirs = await accept(undefined, other, otherKey);

    expect(await relay()).toBe(0);

    expect(await outboxRows(other.config.QUEUE_PREFIX)).toBe(1);
    expect(await other.relayOutbox()).toBe(1);
    expect(await other.queue.getJob(theirs)).toBeDefined();
  });
});
