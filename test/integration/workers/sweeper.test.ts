import { type Job, Queue, Worker } from "bullmq";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createApp } from "../../../src/api/app.js";
import { decide } from "../../../src/domain/decide.js";
import type { DeliveryOutcome } from "../../../src/domain/delivery-outcome.js";
import type { RetryPolicy } from "../../../src/domain/retry-policy.js";
import type { MessageState } from "../../../src/domain/state.js";
import { DELIVERY_QUEUE, type DeliveryJobData } from "../../../src/store/delivery-queue.js";
import { appendEvents, loadMessage } from "../../../src/store/events.js";
import { createDeliveryProcessor } from "../../../workers/deliver.js";
import { sweep } from "../../../workers/sweeper.js";
import {
  createHarness,
  eventually,
  getMessage,
  onboard,
  silentLogger,
  simulatorProviders,
  unreachableQueue,
} from "../../support/harness.js";
import { beforeEachPipeline, throughClient } from "../../support/redis-interleave.js";
import { attemptsOf, dataOf, expectFinishedHistory, rowOf, shapeOf } from "./history.js";

const h = createHarness();
const policy: RetryPolicy = { maxAttempts: 5, baseDelayMs: 20, maxDelayMs: 600_000 };

/** A queue whose Redis is unreachable: the API's enqueue fails, as when Redis is down. */
const { queue: deadQueue, close: closeDeadQueue } = unreachableQueue(h.config.QUEUE_PREFIX);
const appWithoutRedis = createApp({ ...h.deps, queue: deadQueue });

/**
 * The messages of this file. The database is shared with the other test files, and a sweep with
 * no grace period also re-enqueues their unfinished messages into this file's queue; the worker
 * below leaves those alone so it never delivers a message another test is driving by hand.
 */
const mine = new Set<string>();
let worker: Worker<DeliveryJobData> | undefined;
let apiKey: string;

function startScopedWorker(): void {
  if (worker) return;
  const deliver = createDeliveryProcessor({
    db: h.db,
    store: h.deliveryStore,
    providers: simulatorProviders(),
    policy,
    logger: silentLogger,
    now: () => new Date(),
    random: Math.random,
  });
  worker = new Worker<DeliveryJobData>(
    DELIVERY_QUEUE,
    async (job: Job<DeliveryJobData>, token?: string) => {
      if (mine.has(job.data.messageId)) await deliver(job, token);
    },
    {
      connection: new Redis(h.config.REDIS_URL, { maxRetriesPerRequest: null }),
      prefix: h.config.QUEUE_PREFIX,
      concurrency: 20,
    },
  );
  worker.on("error", () => {});
}

beforeAll(async () => {
  apiKey = (await onboard(h)).apiKey;
});

afterAll(async () => {
  if (worker) {
    await worker.close();
    (await worker.client).disconnect();
  }
  await closeDeadQueue();
  await h.close();
});

/**
 * POSTs an SMS through the app whose Redis is down (the API must still accept it), then takes its
 * row out of the delivery outbox, as if the relay had added its job and Redis had then lost it.
 */
async function acceptWithLostJob(to = "+14155550100"): Promise<string> {
  const id = await acceptWhileRedisIsDown(to);
  await h.sql`delete from delivery_outbox where message_id = ${id}`;
  return id;
}

/** POSTs an SMS through the app whose Redis is down; the API must still accept it. */
async function acceptWhileRedisIsDown(to = "+14155550100"): Promise<string> {
  const response = await appWithoutRedis.request("/api/v1/notifications/sms", {
    method: "POST",
    headers: { "content-type": "application/json", "x-api-key": apiKey },
    body: JSON.stringify({ payload: { to, body: "swept" } }),
  });
  expect(response.status).toBe(202);
  const { request_id } = (await response.json()) as { request_id: string };
  mine.add(request_id);
  return request_id;
}

async function statusOf(messageId: string): Promise<string> {
  const response = await getMessage(h, apiKey, messageId);
  expect(response.status).toBe(200);
  return ((await response.json()) as { status: string }).status;
}

function reachesFinal(messageId: string) {
  return eventually(
    async () => {
      const row = await rowOf(h.db, messageId);
      return row && ["success", "failed", "rejected"].includes(row.status) ? row : undefined;
    },
    10_000,
    `message ${messageId} to finish`,
  );
}

/**
 * Records a message's first attempt and its outcome by hand, as a worker records them (the job
 * leaves its queue only after this): a success makes the message final, a transient failure
 * schedules its retry.
 */
async function attemptByHand(messageId: string, outcome: DeliveryOutcome): Promise<MessageState> {
  return h.sql.begin(async (tx) => {
    let state = await loadMessage(tx, messageId);
    const start = decide(state, {
      type: "start_attempt",
      now: new Date(),
      policy,
      random: 0.5,
      organizationActive: true,
      preparation: { ready: true },
    });
    if (!("events" in start)) throw new Error("start refused");
    state = await appendEvents(tx, state, start.events);
    const recorded = decide(state, {
      type: "record_outcome",
      attempt: 1,
      outcome,
      now: new Date(),
      policy,
      random: 0.5,
    });
    if (!("events" in recorded)) throw new Error("outcome refused");
    return appendEvents(tx, state, recorded.events);
  });
}

describe("sweeper", () => {
  it("given a message accepted moments ago without a job, when swept with a grace period, then it is left alone", async () => {
    const id = await acceptWithLostJob();

    await sweep({ db: h.db, queue: h.queue, now: () => new Date(), graceMs: 60_000 });

    expect(await h.queue.getJob(id)).toBeUndefined();
    expect(await statusOf(id)).toBe("accepted");
  });

  it("given a message still waiting in the delivery outbox, when swept, then it is left to the relay", async () => {
    const id = await acceptWhileRedisIsDown();

    // A second later, so the message is past any cutoff.
    await sweep({ db: h.db, queue: h.queue, now: () => new Date(Date.now() + 1000), graceMs: 0 });

    expect(await h.queue.getJob(id)).toBeUndefined();
    expect(await statusOf(id)).toBe("accepted");
  });

  it("given a scheduled send waiting for its send_at, when swept, then it is left alone (it has no job by design)", async () => {
    const response = await appWithoutRedis.request("/api/v1/notifications/sms", {
      method: "POST",
      headers: { "content-type": "application/json", "x-api-key": apiKey },
      body: JSON.stringify({
        payload: { to: "+14155550100", body: "later" },
        send_at: new Date(Date.now() + 3_600_000).toISOString(),
      }),
    });
    expect(response.status).toBe(202);
    const { request_id: id } = (await response.json()) as { request_id: string };
    mine.add(id);

    await sweep({ db: h.db, queue: h.queue, now: () => new Date(Date.now() + 1000), graceMs: 0 });

    expect(await h.queue.getJob(id)).toBeUndefined();
    expect(await statusOf(id)).toBe("accepted");
  });

  it("given a message whose job Redis lost, when swept, then it is enqueued once and delivered", async () => {
    const id = await acceptWithLostJob();
    expect(await statusOf(id)).toBe("accepted");
    expect(await h.queue.getJob(id)).toBeUndefined();

    // Polls rather than sleeps: a message accepted in this very millisecond is not yet older than the cutoff.
    const swept = await eventually(async () => {
      const count = await sweep({ db: h.db, queue: h.queue, now: () => new Date(), graceMs: 0 });
      return (await h.queue.getJob(id)) ? count : undefined;
    });
    expect(swept).toBeGreaterThanOrEqual(1);
    expect(await (await h.queue.getJob(id))?.getState()).toMatch(/^(waiting|prioritized)$/);

    startScopedWorker();
    const row = await reachesFinal(id);
    expect(row.status).toBe("success");
    expect(row.retryCount).toBe(0);
    const { events } = await expectFinishedHistory(h.db, id);
    expect(attemptsOf(events)).toBe(1);

    // A finished message is never enqueued again.
    await sweep({ db: h.db, queue: h.queue, now: () => new Date(), graceMs: 0 });
    expect(await h.queue.getJob(id)).toBeUndefined();
    expect(await statusOf(id)).toBe("success");
  });

  it("given a message whose job ends between the sweep's read and its look in Redis, when swept, then no job is added", async () => {
    const id = await acceptWithLostJob();
    // The sweep reads the message unfinished; then, before it looks in Redis, the message's job
    // ends (here: its delivery is recorded by hand, as the worker records it before the job ends).
    let ended: Promise<MessageState> | undefined;
    const looking = beforeEachPipeline((await h.queue.client) as unknown as Redis, async (keys) => {
      if (!keys.some((key) => key.endsWith(`:${id}`))) return;
      ended ??= attemptByHand(id, { ok: true, provider: "simulator", providerMessageId: "by-hand" });
      await ended;
    });
    const added: string[] = [];
    const queue = throughClient(h.queue, looking, {
      add: {
        value(this: Queue<DeliveryJobData>, ...args: Parameters<Queue<DeliveryJobData>["add"]>) {
          added.push(args[1].messageId);
          return Queue.prototype.add.apply(this, args);
        },
      },
    });

    await eventually(async () => {
      await sweep({ db: h.db, queue, now: () => new Date(), graceMs: 0 });
      return ended ? true : undefined;
    });
    expect((await rowOf(h.db, id))?.status).toBe("success");
    expect(added).not.toContain(id);
  });

  it("given a message whose job was lost while a retry was scheduled, when swept, then it is re-added delayed until the retry is due", async () => {
    const id = await acceptWithLostJob();
    // The first attempt failed and the provider asked to wait 800 ms; then Redis lost the job.
    const scheduled = await attemptByHand(id, {
      ok: false,
      provider: "simulator",
      error: { class: "transient", code: "rate_limited", message: "429", retryAfterMs: 800 },
    });
    if (scheduled.status !== "pending" || !scheduled.nextAttemptAt) throw new Error("no retry scheduled");
    const dueAt = Date.parse(scheduled.nextAttemptAt);
    expect((await rowOf(h.db, id))?.nextAttemptAt?.getTime()).toBe(dueAt);
    expect(await h.queue.getJob(id)).toBeUndefined();

    const { swept, sweptAt, job } = await eventually(async () => {
      const at = Date.now();
      const count = await sweep({ db: h.db, queue: h.queue, now: () => new Date(at), graceMs: 0 });
      const added = await h.queue.getJob(id);
      return added ? { swept: count, sweptAt: at, job: added } : undefined;
    });
    expect(swept).toBeGreaterThanOrEqual(1);
    expect(await job.getState()).toBe("delayed");
    expect(job.delay).toBe(dueAt - sweptAt);
    expect(job.timestamp + job.delay).toBeGreaterThanOrEqual(dueAt);
    expect(job.timestamp + job.delay).toBeLessThan(dueAt + 500);

    startScopedWorker();
    const row = await reachesFinal(id);
    expect(row.status).toBe("success");
    expect(row.retryCount).toBe(1);
    const { events } = await expectFinishedHistory(h.db, id);
    expect(shapeOf(events)).toEqual([
      "accepted",
      "pending:attempt_started",
      "pending:retry_scheduled",
      "pending:attempt_started",
      "success",
    ]);
    expect(events[3]?.occurredAt.getTime()).toBeGreaterThanOrEqual(dueAt);
    expect(dataOf(events[4]).attempt).toBe(2);
  });
});
