import type { Job } from "bullmq";
import { DelayedError } from "bullmq";
import { eq } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { organizations } from "../../../db/schema.js";
import type { SmsMessage, SmsProvider } from "../../../src/channels/sms/providers/provider.js";
import { SimulatorSmsProvider } from "../../../src/channels/sms/providers/simulator.js";
import { type Command, decide } from "../../../src/domain/decide.js";
import type { DeliveryOutcome } from "../../../src/domain/delivery-outcome.js";
import type { RetryPolicy } from "../../../src/domain/retry-policy.js";
import type { MessageState } from "../../../src/domain/state.js";
import type { DeliveryJobData } from "../../../src/store/delivery-queue.js";
import { appendEvents, ConcurrencyError, loadMessage } from "../../../src/store/events.js";
import { createDeliveryProcessor } from "../../../workers/deliver.js";
import {
  createHarness,
  eventually,
  getMessage,
  type Harness,
  onboard,
  sendNotification,
  sendSms,
  silentLogger,
  simulatorProviders,
} from "../../support/harness.js";
import {
  attemptsOf,
  dataOf,
  eventsOf,
  expectFinishedHistory,
  isAttemptStart,
  isRetryScheduled,
  rowOf,
  shapeOf,
} from "./history.js";

interface MessageRecord {
  message_id: string;
  status: string;
  retry_count: number;
  delivery_time: string | null;
  created_at: string;
  updated_at: string;
  payload: { retry_count: number; recipient: string };
}

const FINAL = ["success", "failed", "rejected"];
const ORDINARY = "+14155550100";

/** Runs a worker from the start: every message sent through it is delivered for real. */
const live = createHarness();
/** Never runs a worker: its jobs stay queued while a test drives the processor by hand. */
const idle = createHarness();
/** Starts its worker only once the test has changed the world behind an accepted message. */
const late = createHarness();

let liveKey: string;
let idleKey: string;

beforeAll(async () => {
  live.startWorker();
  [liveKey, idleKey] = await Promise.all([
    onboard(live).then((o) => o.apiKey),
    onboard(idle).then((o) => o.apiKey),
  ]);
});

afterAll(async () => {
  await Promise.all([live.close(), idle.close(), late.close()]);
});

async function accept(harness: Harness, apiKey: string, body: Record<string, unknown>): Promise<string> {
  const response = await sendSms(harness, apiKey, body);
  expect(response.status).toBe(202);
  const { request_id } = (await response.json()) as { request_id: string };
  return request_id;
}

async function finalRecord(harness: Harness, apiKey: string, messageId: string): Promise<MessageRecord> {
  return eventually(
    async () => {
      const record = (await (await getMessage(harness, apiKey, messageId)).json()) as MessageRecord;
      return FINAL.includes(record.status) ? record : undefined;
    },
    10_000,
    `message ${messageId} to reach a final state`,
  );
}

/** Sends one SMS through the API, waits until the live worker has finished it, checks its history. */
async function deliver(to: string, extra: Record<string, unknown> = {}) {
  const id = await accept(live, liveKey, { payload: { to, body: `to ${to}`, sender: "ACME" }, ...extra });
  const record = await finalRecord(live, liveKey, id);
  const { events, row } = await expectFinishedHistory(live.db, id);
  // DESIGN §3: retry_count = number of retries performed = attempts − 1.
  expect(record.retry_count).toBe(attemptsOf(events) - 1);
  expect(record.payload.retry_count).toBe(record.retry_count);
  expect(record.status).toBe(row.status);
  return { id, record, events };
}

const policy: RetryPolicy = { maxAttempts: 5, baseDelayMs: 20, maxDelayMs: 600_000 };

/** A provider that remembers every call and answers like the simulator (or never, if asked). */
class RecordingProvider implements SmsProvider {
  readonly name = "recording";
  readonly calls: SmsMessage[] = [];
  readonly #simulator = new SimulatorSmsProvider({ rateLimitRetryAfterMs: 50 });

  send(message: SmsMessage): Promise<DeliveryOutcome> {
    this.calls.push(message);
    return this.#simulator.send(message);
  }
}

function processorFor(harness: Harness, provider: SmsProvider, now: () => Date = () => new Date()) {
  return createDeliveryProcessor({
    db: harness.db,
    store: harness.deliveryStore,
    providers: simulatorProviders({ sms: provider }),
    policy,
    logger: silentLogger,
    now,
    random: () => 0.5,
  });
}

/** Just enough of a BullMQ job for the processor; remembers where it was asked to be delayed to. */
function fakeJob(messageId: string) {
  const delayedTo: number[] = [];
  const job = {
    data: { messageId },
    moveToDelayed: async (timestamp: number) => {
      delayedTo.push(timestamp);
    },
  } as unknown as Job<DeliveryJobData>;
  return { job, delayedTo };
}

/** What a worker asks for a message of an active organization, prepared and ready to send. */
function startNow(): Command {
  return {
    type: "start_attempt",
    now: new Date(),
    policy,
    random: 0.5,
    organizationActive: true,
    preparation: { ready: true },
  };
}

/** Appends what the domain decides for a command, as a worker would, from a freshly loaded state. */
async function appendDecided(
  harness: Harness,
  messageId: string,
  command: (state: MessageState) => Parameters<typeof decide>[1],
) {
  return harness.sql.begin(async (tx) => {
    const state = await loadMessage(tx, messageId);
    const decision = decide(state, command(state));
    if (!("events" in decision)) throw new Error(`refused: ${JSON.stringify(decision)}`);
    return appendEvents(tx, state, decision.events);
  });
}

describe("delivery through the API and a worker, for every simulator outcome", () => {
  it("given an ordinary recipient, then the message succeeds on its first attempt with a delivery time", async () => {
    const { record, events } = await deliver(ORDINARY);
    expect(record.status).toBe("success");
    expect(record.retry_count).toBe(0);
    expect(record.delivery_time).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/);
    expect(new Date(record.delivery_time ?? "").toISOString()).toBe(record.delivery_time);
    expect(Date.parse(record.updated_at)).toBeGreaterThanOrEqual(Date.parse(record.created_at));
    expect(shapeOf(events)).toEqual(["accepted", "pending:attempt_started", "success"]);
    expect(dataOf(events.at(-1)).provider).toBe("simulator");
  });

  it.each([
    ["+15005550001", "invalid_number"],
    ["+15005550004", "opted_out"],
    ["+15005550009", "not_mobile"],
  ])(
    "given the refused recipient %s, then the message is rejected (%s) after one attempt and no retry",
    async (to, code) => {
      const { record, events } = await deliver(to);
      expect(record.status).toBe("rejected");
      expect(record.retry_count).toBe(0);
      expect(record.delivery_time).toBeNull();
      expect(shapeOf(events)).toEqual(["accepted", "pending:attempt_started", "rejected"]);
      expect(dataOf(events.at(-1))).toMatchObject({
        reason: "recipient_refused",
        error: { class: "rejected", code },
      });
    },
  );

  it("given a recipient failing transiently on every attempt, then it fails after 5 attempts with retry_count 4", async () => {
    const { record, events } = await deliver("+15005550500");
    expect(record.status).toBe("failed");
    expect(record.retry_count).toBe(4);
    expect(record.delivery_time).toBeNull();
    expect(events.filter(isAttemptStart)).toHaveLength(5);
    expect(events.filter(isRetryScheduled)).toHaveLength(4);
    expect(dataOf(events.at(-1))).toMatchObject({ reason: "retries_exhausted", attempt: 5 });
  });

  it("given the same recipient with retry_enabled false, then it fails after exactly one attempt", async () => {
    const { record, events } = await deliver("+15005550500", { retry_enabled: false });
    expect(record.status).toBe("failed");
    expect(record.retry_count).toBe(0);
    expect(shapeOf(events)).toEqual(["accepted", "pending:attempt_started", "failed"]);
    expect(dataOf(events.at(-1))).toMatchObject({
      reason: "retries_disabled",
      error: { code: "simulated_outage" },
    });
  });

  it.each([
    ["+15005550501", 1],
    ["+15005550502", 2],
  ])("given %s failing transiently at first, then it succeeds with retry_count %i", async (to, retries) => {
    const { record, events } = await deliver(to);
    expect(record.status).toBe("success");
    expect(record.retry_count).toBe(retries);
    expect(record.delivery_time).not.toBeNull();
    expect(events.filter(isRetryScheduled).map((e) => dataOf(e).error?.code)).toEqual(
      Array(retries).fill("simulated_outage"),
    );
    expect(dataOf(events.at(-1)).attempt).toBe(retries + 1);
  });

  it("given a rate-limited first attempt (429, Retry-After 50 ms), then the retry waits at least 50 ms and succeeds", async () => {
    const { record, events } = await deliver("+15005550429");
    expect(record.status).toBe("success");
    expect(record.retry_count).toBe(1);
    expect(shapeOf(events)).toEqual([
      "accepted",
      "pending:attempt_started",
      "pending:retry_scheduled",
      "pending:attempt_started",
      "success",
    ]);
    const retry = events[2];
    const nextAttempt = events[3];
    if (!retry || !nextAttempt) throw new Error("missing events");
    expect(dataOf(retry).error).toMatchObject({ class: "transient", code: "rate_limited", retryAfterMs: 50 });
    const failedAt = retry.occurredAt.getTime();
    expect(Date.parse(String(dataOf(retry).retryAt)) - failedAt).toBeGreaterThanOrEqual(50);
    expect(nextAttempt.occurredAt.getTime() - failedAt).toBeGreaterThanOrEqual(50);
  });
});

describe("pre-send checks", () => {
  it("given an organization deactivated after its message was accepted, then the worker rejects it without an attempt", async () => {
    const organization = await onboard(late);
    const id = await accept(late, organization.apiKey, { payload: { to: ORDINARY, body: "hello" } });
    await late.db.update(organizations).set({ active: false }).where(eq(organizations.id, organization.id));
    const provider = new RecordingProvider();
    late.startWorker({ providers: { sms: provider } });

    // Read the record from the database: the API now answers 403 for this organization's key.
    const row = await eventually(async () => {
      const current = await rowOf(late.db, id);
      return current && FINAL.includes(current.status) ? current : undefined;
    });
    expect(row.status).toBe("rejected");
    expect(row.retryCount).toBe(0);
    const { events } = await expectFinishedHistory(late.db, id);
    expect(shapeOf(events)).toEqual(["accepted", "rejected"]);
    expect(dataOf(events[1])).toMatchObject({ reason: "organization_inactive", attempt: 0 });
    expect(attemptsOf(events)).toBe(0);
    expect(provider.calls).toHaveLength(0);
  });
});

describe("the processor run by hand on a message whose job is still queued", () => {
  it("given a message past its time-to-live, then it fails with ttl_expired and the provider is never called", async () => {
    const id = await accept(idle, idleKey, { payload: { to: ORDINARY, body: "too late" } });
    const provider = new RecordingProvider();
    const twoDaysLater = () => new Date(Date.now() + 2 * 24 * 60 * 60 * 1000);
    await processorFor(idle, provider, twoDaysLater)(fakeJob(id).job);

    expect(provider.calls).toHaveLength(0);
    const { events, row } = await expectFinishedHistory(idle.db, id);
    expect(row.status).toBe("failed");
    expect(row.retryCount).toBe(0);
    expect(shapeOf(events)).toEqual(["accepted", "pending:attempt_started", "failed"]);
    expect(dataOf(events.at(-1)).reason).toBe("ttl_expired");
  });

  it("given an e-mail past its time-to-live whose template is missing too, then it fails with ttl_expired, not rejected", async () => {
    const response = await sendNotification(idle, "email", idleKey, {
      payload: {
        template_name: "never-created",
        message: { from_email: "a@acme.test", subject: "late", to: [{ email: "b@example.com" }] },
      },
    });
    const { request_id: id } = (await response.json()) as { request_id: string };
    const twoDaysLater = () => new Date(Date.now() + 2 * 24 * 60 * 60 * 1000);
    await processorFor(idle, new RecordingProvider(), twoDaysLater)(fakeJob(id).job);

    const { events, row } = await expectFinishedHistory(idle.db, id);
    expect(row.status).toBe("failed");
    expect(shapeOf(events)).toEqual(["accepted", "pending:attempt_started", "failed"]);
    expect(dataOf(events.at(-1)).reason).toBe("ttl_expired");
  });

  it("given an attempt started by a worker that died, then the next run records it as interrupted and delivers again", async () => {
    const id = await accept(idle, idleKey, { payload: { to: ORDINARY, body: "again" } });
    // The worker that died got as far as recording the start of attempt 1.
    await appendDecided(idle, id, startNow);

    const provider = new RecordingProvider();
    await processorFor(idle, provider)(fakeJob(id).job);

    const { events, row } = await expectFinishedHistory(idle.db, id);
    expect(shapeOf(events)).toEqual([
      "accepted",
      "pending:attempt_started",
      "pending:retry_scheduled",
      "pending:attempt_started",
      "success",
    ]);
    expect(dataOf(events[2])).toMatchObject({
      attempt: 1,
      error: { class: "transient", code: "attempt_interrupted" },
    });
    expect(row.status).toBe("success");
    expect(row.retryCount).toBe(1);
    expect(row.retryCount).toBe(attemptsOf(events) - 1);
    expect(provider.calls.map((c) => c.attempt)).toEqual([2]);
  });

  it("given a retry scheduled in the future, then the processor moves the job to the retry time without an attempt", async () => {
    const id = await accept(idle, idleKey, { payload: { to: ORDINARY, body: "later" } });
    await appendDecided(idle, id, startNow);
    const scheduled = await appendDecided(idle, id, (state) => ({
      type: "record_outcome",
      attempt: state.status === "pending" ? state.attempts : 0,
      outcome: {
        ok: false,
        provider: "test",
        error: { class: "transient", code: "slow", message: "slow", retryAfterMs: 60_000 },
      },
      now: new Date(),
      policy,
      random: 0.5,
    }));
    if (scheduled.status !== "pending" || !scheduled.nextAttemptAt) throw new Error("no retry scheduled");

    const provider = new RecordingProvider();
    const { job, delayedTo } = fakeJob(id);
    await expect(processorFor(idle, provider)(job)).rejects.toBeInstanceOf(DelayedError);

    expect(delayedTo).toEqual([Date.parse(scheduled.nextAttemptAt)]);
    expect(provider.calls).toHaveLength(0);
    expect(await eventsOf(idle.db, id)).toHaveLength(3);
  });

  it.each([
    [ORDINARY, "success"],
    ["+15005550001", "rejected"],
    ["+15005550500", "failed"],
  ])(
    "given a message to %s already finished (%s), then processing it again changes nothing",
    async (to, status) => {
      const { id, events } = await deliver(to, { retry_enabled: false });
      expect(events.at(-1)?.type).toBe(status);
      const provider = new RecordingProvider();
      const { job, delayedTo } = fakeJob(id);

      await processorFor(live, provider)(job);
      await processorFor(live, provider)(job);

      expect(await eventsOf(live.db, id)).toEqual(events);
      expect((await rowOf(live.db, id))?.status).toBe(status);
      expect(provider.calls).toHaveLength(0);
      expect(delayedTo).toHaveLength(0);
    },
  );
});

describe("the event store", () => {
  async function attemptInRolledBackTransaction(statement: (tx: Harness["sql"]) => Promise<unknown>) {
    const rollback = new Error("rollback");
    try {
      await idle.sql.begin(async (tx) => {
        await tx`set local lock_timeout = '5s'`;
        await statement(tx as unknown as Harness["sql"]);
        throw rollback;
      });
    } catch (error) {
      return error === rollback ? undefined : error;
    }
    return undefined;
  }

  it("given stored events, then UPDATE, DELETE and TRUNCATE of message_events are refused as append-only", async () => {
    const id = await accept(idle, idleKey, { payload: { to: ORDINARY, body: "history" } });
    await appendDecided(idle, id, startNow);
    const before = await eventsOf(idle.db, id);
    expect(before).toHaveLength(2);

    // Each runs in a transaction that is rolled back whatever happens, so a missing guard could
    // not wipe the history other test files rely on.
    const update = await attemptInRolledBackTransaction(
      (tx) => tx`update message_events set retry_count = retry_count + 1 where message_id = ${id}`,
    );
    const remove = await attemptInRolledBackTransaction(
      (tx) => tx`delete from message_events where message_id = ${id}`,
    );
    const truncate = await attemptInRolledBackTransaction((tx) => tx`truncate message_events`);

    for (const error of [update, remove, truncate]) {
      expect(error).toBeInstanceOf(Error);
      expect(String((error as Error).message)).toMatch(/append-only/);
    }
    // Outside a transaction too: the statement itself is refused, nothing to roll back.
    await expect(idle.sql`delete from message_events where message_id = ${id}`).rejects.toThrow(
      /append-only/,
    );
    expect(await eventsOf(idle.db, id)).toEqual(before);
  });

  it("given two appends decided from the same loaded state, then the second throws ConcurrencyError and writes nothing", async () => {
    const id = await accept(idle, idleKey, { payload: { to: ORDINARY, body: "race" } });
    const loaded = await loadMessage(idle.sql, id);
    const decision = decide(loaded, startNow());
    if (!("events" in decision)) throw new Error("refused");

    await idle.sql.begin((tx) => appendEvents(tx, loaded, decision.events));
    await expect(idle.sql.begin((tx) => appendEvents(tx, loaded, decision.events))).rejects.toBeInstanceOf(
      ConcurrencyError,
    );

    expect(shapeOf(await eventsOf(idle.db, id))).toEqual(["accepted", "pending:attempt_started"]);
    expect((await rowOf(idle.db, id))?.version).toBe(2);
  });

  it("given two concurrent appends from the same loaded state, then exactly one commits", async () => {
    const id = await accept(idle, idleKey, { payload: { to: ORDINARY, body: "race" } });
    const loaded = await loadMessage(idle.sql, id);
    // The organization was deactivated meanwhile: the domain decides to reject the message.
    const reject = decide(loaded, {
      type: "start_attempt",
      now: new Date(),
      policy,
      random: 0.5,
      organizationActive: false,
    });
    const start = decide(loaded, startNow());
    if (!("events" in reject) || !("events" in start)) throw new Error("refused");

    const results = await Promise.allSettled([
      idle.sql.begin((tx) => appendEvents(tx, loaded, reject.events)),
      idle.sql.begin((tx) => appendEvents(tx, loaded, start.events)),
    ]);

    const failures = results.filter((r) => r.status === "rejected");
    expect(failures).toHaveLength(1);
    expect((failures[0] as PromiseRejectedResult).reason).toBeInstanceOf(ConcurrencyError);
    const events = await eventsOf(idle.db, id);
    expect(events).toHaveLength(2);
    expect((await rowOf(idle.db, id))?.status).toBe(events[1]?.type);
  });
});
