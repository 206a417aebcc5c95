import type { Job } from "bullmq";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { providerList } from "../../../src/channels/providers/provider-list.js";
import type { SmsMessage, SmsProvider } from "../../../src/channels/sms/providers/provider.js";
import type { DeliveryOutcome } from "../../../src/domain/delivery-outcome.js";
import type { DeliveryJobData } from "../../../src/store/delivery-queue.js";
import { createDeliveryProcessor } from "../../../workers/deliver.js";
import {
  createHarness,
  eventually,
  onboard,
  sendSms,
  silentLogger,
  simulatorProviders,
} from "../../support/harness.js";
import { dataOf, eventsOf } from "./history.js";

/**
 * When an attempt is counted (docs/decisions/0046): never when no provider was called. The worker
 * processor is driven by hand (no BullMQ worker), over a provider list whose clock the test moves,
 * so that jobs meet a breaker at the instant its cool-down ends; and over a clock that jumps while
 * a message is prepared, as a slow render would move it past the message's time to live.
 */

/** Never runs a worker: each test runs the processor itself. */
const h = createHarness();
let apiKey = "";

beforeAll(async () => {
  apiKey = (await onboard(h)).apiKey;
});
afterAll(() => h.close());

/** An SMS provider that answers as told: at once, or when the test lets it. */
class Gated implements SmsProvider {
  readonly name = "twilio:primary";
  readonly timeoutMs = 5000;
  readonly calls: SmsMessage[] = [];
  next: "fail" | "hold" | "ok" = "ok";
  #release: (() => void) | undefined;

  async send(message: SmsMessage): Promise<DeliveryOutcome> {
    this.calls.push(message);
    const answer = this.next;
    if (answer === "fail")
      return {
        ok: false,
        provider: this.name,
        error: { class: "transient", code: "timeout", message: "no answer" },
      };
    if (answer === "hold") await new Promise<void>((resolve) => (this.#release = resolve));
    return { ok: true, provider: this.name, providerMessageId: `SM${this.calls.length}` };
  }

  release(): void {
    this.#release?.();
  }
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

async function accept(to: string): Promise<string> {
  const response = await sendSms(h, apiKey, {
    payload: { to, body: "Your code is 123456" },
    notification_type: "OTP",
  });
  expect(response.status).toBe(202);
  return ((await response.json()) as { request_id: string }).request_id;
}

describe("a provider list's breaker at the end of its cool-down, with several jobs at once", () => {
  it("one job gets the probe; the others are handed back with no attempt counted, never 'providers_unavailable'", async () => {
    let clock = 0;
    const primary = new Gated();
    const sms = providerList({
      channel: "sms",
      accounts: [primary],
      order: [primary.name],
      breaker: { failures: 1, cooldownMs: 1000 },
      clock: () => clock,
    });
    // Opened by one failure, then its cool-down ends: the next call is its one probe.
    primary.next = "fail";
    await sms.send({ messageId: "warm-up", attempt: 1, to: "+14155550100", from: "ACME", body: "x" });
    expect(sms.breakers?.()).toEqual([{ provider: primary.name, state: "open" }]);
    clock += 1000;
    primary.next = "hold";

    const process = createDeliveryProcessor({
      db: h.db,
      store: h.deliveryStore,
      providers: simulatorProviders({ sms }),
      policy: { maxAttempts: 5, baseDelayMs: 20, maxDelayMs: 60_000 },
      logger: silentLogger,
      now: () => new Date(),
      random: () => 0.5,
    });
    const ids = await Promise.all(["+14155550101", "+14155550102", "+14155550103"].map(accept));
    const jobs = ids.map(fakeJob);
    // Every job at once, as a worker's concurrent slots take them when the cool-down ends.
    const runs = jobs.map(({ job }) => process(job).catch(() => undefined));
    await eventually(async () => (primary.calls.length === 2 ? true : undefined), 5000, "the probe");
    await eventually(
      async () => (jobs.filter((j) => j.delayedTo.length > 0).length === 2 ? true : undefined),
      5000,
      "the other jobs handed back",
    );
    primary.release();
    await Promise.all(runs);

    const histories = await Promise.all(ids.map((id) => eventsOf(h.db, id)));
    const probed = histories.filter((events) => events.some((e) => e.type === "success"));
    expect(probed).toHaveLength(1);
    for (const events of histories) {
      expect(events.map((e) => dataOf(e).error?.code)).not.toContain("providers_unavailable");
      if (probed.includes(events)) continue;
      // Handed back untouched: no attempt started, none spent.
      expect(events.map((e) => e.type)).toEqual(["accepted"]);
    }
    expect(sms.breakers?.()).toEqual([{ provider: primary.name, state: "closed" }]);
  });
});

describe("a message whose time to live ends while it is prepared", () => {
  it("is failed ttl_expired on the clock as it is after the preparation, and no provider is called", async () => {
    const id = await accept("+14155550104");
    const provider = new Gated();
    // The clock the worker reads first (before the preparation) and then every later time: 11
    // minutes on, past an OTP's 10-minute time to live, as a render that took that long would be.
    const start = Date.now();
    let reads = 0;
    const process = createDeliveryProcessor({
      db: h.db,
      store: h.deliveryStore,
      providers: simulatorProviders({ sms: provider }),
      policy: { maxAttempts: 5, baseDelayMs: 20, maxDelayMs: 60_000 },
      logger: silentLogger,
      now: () => new Date(reads++ === 0 ? start : start + 11 * 60_000),
      random: () => 0.5,
    });
    await process(fakeJob(id).job);
    expect(provider.calls).toHaveLength(0);
    const events = await eventsOf(h.db, id);
    expect(events.at(-1)).toMatchObject({ type: "failed", data: { reason: "ttl_expired" } });
  });
});
