import type { Job } from "bullmq";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { SmsMessage, SmsProvider } from "../../../src/channels/sms/providers/provider.js";
import { SimulatorSmsProvider } from "../../../src/channels/sms/providers/simulator.js";
import type { DeliveryOutcome } from "../../../src/domain/delivery-outcome.js";
import { type CancelOutcome, cancelMessage } from "../../../src/messages/cancel.js";
import type { DeliveryJobData } from "../../../src/store/delivery-queue.js";
import { createDeliveryProcessor } from "../../../workers/deliver.js";
import type { DeliveryStore } from "../../../workers/delivery-store.js";
import { createHarness, onboard, sendSms, silentLogger, simulatorProviders } from "../../support/harness.js";
import { eventsOf } from "./history.js";

// A cancel racing the worker's start of the first attempt (issue 20, docs/decisions/0044): both
// append the message's next event; the one that commits second is refused by (message_id, seq)
// and decides again on what is there. Either the message is canceled and never sent, or it was
// sent and the cancel is told it is too late: never both, never neither. No worker runs here: the
// tests drive the processor by hand, on the real Postgres.
const h = createHarness();
let org: Awaited<ReturnType<typeof onboard>>;

beforeAll(async () => {
  org = await onboard(h);
});
afterAll(() => h.close());

class CountingProvider implements SmsProvider {
  readonly name = "counting";
  readonly sentTo = new Map<string, number>();
  readonly #simulator = new SimulatorSmsProvider({ rateLimitRetryAfterMs: 50 });

  send(message: SmsMessage): Promise<DeliveryOutcome> {
    this.sentTo.set(message.messageId, (this.sentTo.get(message.messageId) ?? 0) + 1);
    return this.#simulator.send(message);
  }
}

function processor(provider: SmsProvider, store: DeliveryStore = h.deliveryStore) {
  const run = createDeliveryProcessor({
    db: h.db,
    store,
    providers: simulatorProviders({ sms: provider }),
    policy: { maxAttempts: 5, baseDelayMs: 20, maxDelayMs: 1000 },
    logger: silentLogger,
    now: () => new Date(),
    random: () => 0.5,
  });
  return (messageId: string) =>
    run({
      data: { messageId },
      moveToDelayed: async () => {},
    } as unknown as Job<DeliveryJobData>);
}

const cancel = (messageId: string, store: Parameters<typeof cancelMessage>[0]["store"] = h.deps.store) =>
  cancelMessage({ store, now: () => new Date() }, org.id, messageId);

async function acceptOne(): Promise<string> {
  const response = await sendSms(h, org.apiKey, {
    payload: { to: "+14155550100", body: "race", sender: "ACME" },
  });
  expect(response.status).toBe(202);
  return ((await response.json()) as { request_id: string }).request_id;
}

async function typesOf(messageId: string): Promise<string[]> {
  return (await eventsOf(h.db, messageId)).map((event) => event.type);
}

describe("cancel against the worker starting the first attempt", () => {
  it("the worker's start commits between the cancel's read and its append: the cancel is too late, the message is sent once", async () => {
    const id = await acceptOne();
    const provider = new CountingProvider();
    const deliver = processor(provider);
    // The cancel has read the message (accepted) and decided; before its append commits, the worker runs.
    const store = {
      loadMessage: h.deps.store.loadMessage,
      append: async (...args: Parameters<typeof h.deps.store.append>) => {
        await deliver(id);
        return h.deps.store.append(...args);
      },
    };
    expect(await cancel(id, store)).toEqual({ outcome: "too_late", status: "success" });
    expect(provider.sentTo.get(id)).toBe(1);
    expect(await typesOf(id)).toEqual(["accepted", "pending", "success"]);
  });

  it("the cancel commits between the worker's read and its append: the worker finds the message final and sends nothing", async () => {
    const id = await acceptOne();
    const provider = new CountingProvider();
    let canceled: CancelOutcome | undefined;
    const store: DeliveryStore = {
      content: h.deliveryStore.content,
      append: h.deliveryStore.append,
      load: async (messageId) => {
        const loaded = await h.deliveryStore.load(messageId);
        canceled = await cancel(messageId);
        return loaded;
      },
    };
    await processor(provider, store)(id);
    expect(canceled).toEqual({ outcome: "canceled" });
    expect(provider.sentTo.has(id)).toBe(false);
    expect(await typesOf(id)).toEqual(["accepted", "rejected"]);
  });

  it("raced 40 times: each message is either canceled and never sent, or sent once with the cancel refused", async () => {
    const ids = await Promise.all(Array.from({ length: 40 }, () => acceptOne()));
    const provider = new CountingProvider();
    const deliver = processor(provider);
    const outcomes = await Promise.all(
      ids.map(async (id, i) => {
        // Half the cancels start with the worker, the others 1 to 7 ms after it: early ones win,
        // late ones come too late, and some land in between (the worker's read or append under way).
        const later = (
          i % 2 === 0 ? Promise.resolve() : new Promise((resolve) => setTimeout(resolve, i % 8))
        ).then(() => cancel(id));
        const [outcome] = await Promise.all([later, deliver(id)]);
        return { id, outcome };
      }),
    );
    // Both ways should be seen across 40 races; that is not asserted (the machine's timing decides).
    const canceled = outcomes.filter(({ outcome }) => outcome.outcome === "canceled").length;
    console.info(`cancel race: ${canceled} of ${outcomes.length} canceled, the others sent`);
    for (const { id, outcome } of outcomes) {
      const types = await typesOf(id);
      if (outcome.outcome === "canceled") {
        expect(provider.sentTo.has(id)).toBe(false);
        expect(types).toEqual(["accepted", "rejected"]);
      } else {
        // Too late while the attempt was under way (pending) or once it had succeeded.
        expect(outcome).toMatchObject({
          outcome: "too_late",
          status: expect.stringMatching(/^(pending|success)$/),
        });
        expect(provider.sentTo.get(id)).toBe(1);
        expect(types).toEqual(["accepted", "pending", "success"]);
      }
    }
  });
});
