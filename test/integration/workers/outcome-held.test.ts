import type { Job } from "bullmq";
import pino from "pino";
import postgres from "postgres";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createDatabase } from "../../../db/client.js";
import type { SmsMessage, SmsProvider } from "../../../src/channels/sms/providers/provider.js";
import { SimulatorSmsProvider } from "../../../src/channels/sms/providers/simulator.js";
import type { DeliveryOutcome } from "../../../src/domain/delivery-outcome.js";
import { recordReceipt } from "../../../src/messages/receipts.js";
import type { DeliveryJobData } from "../../../src/store/delivery-queue.js";
import { DatabaseGate } from "../../../workers/database-gate.js";
import { createDeliveryProcessor } from "../../../workers/deliver.js";
import { createDeliveryStore, type DeliveryStore } from "../../../workers/delivery-store.js";
import { testContentVault } from "../../support/content-keys.js";
import {
  createHarness,
  eventually,
  type Harness,
  onboard,
  sendSms,
  simulatorProviders,
} from "../../support/harness.js";
import { createOwnDatabase } from "../../support/own-database.js";
import { eventsOf, shapeOf } from "./history.js";

/**
 * The provider has answered; recording its outcome then fails with a database error that is not
 * an outage of the whole database (a statement cancelled by statement_timeout behind a
 * migration's lock, a serialization failure). The worker holds the outcome and records it once
 * the database takes it, instead of throwing, which would make BullMQ run the job again and send
 * the message a second time. A database of this file's own: the tests lock a table and add a
 * trigger to it.
 */
const HELD = "holding a delivery outcome";

let own: Awaited<ReturnType<typeof createOwnDatabase>>;
let h: Harness;
let apiKey: string;
/** The worker's own connections: every statement is cancelled after 300 ms. */
let worker: ReturnType<typeof createDatabase>;
let admin: postgres.Sql;

beforeAll(async () => {
  own = await createOwnDatabase("held");
  h = createHarness({ DATABASE_URL: own.url });
  apiKey = (await onboard(h)).apiKey;
  const url = new URL(own.url);
  url.searchParams.set("statement_timeout", "300");
  worker = createDatabase({ url: url.toString() });
  admin = postgres(own.url, { max: 2, onnotice: () => {} });
  // Appends to a message listed in injected_faults fail with the listed SQLSTATE.
  await admin.unsafe(`
    create table injected_faults (message_id uuid primary key, sql_state text not null);
    create function raise_injected_fault() returns trigger language plpgsql as $$
    declare state text;
    begin
      select sql_state into state from injected_faults where message_id = new.message_id;
      if state is not null then raise exception 'injected fault' using errcode = state; end if;
      return new;
    end $$;
    create trigger raise_injected_fault before insert on message_events
      for each row execute function raise_injected_fault();`);
});

afterAll(async () => {
  await h?.close();
  await worker?.sql.end();
  await admin?.end();
  await own?.drop();
});

/** Warnings and up, as lines, so a test can wait for the worker to say it holds an outcome. */
function capturingLogger() {
  const lines: string[] = [];
  const logger = pino({ level: "warn" }, { write: (line: string) => lines.push(line) });
  return { logger, saw: (text: string) => lines.some((line) => line.includes(text)) };
}

/** A provider that answers like the simulator, after doing `during` (what goes wrong meanwhile). */
class ProviderThat implements SmsProvider {
  readonly name = "recording";
  calls = 0;
  readonly #simulator = new SimulatorSmsProvider({ rateLimitRetryAfterMs: 50 });
  constructor(private readonly during: (message: SmsMessage) => Promise<void>) {}

  async send(message: SmsMessage): Promise<DeliveryOutcome> {
    this.calls++;
    await this.during(message);
    return this.#simulator.send(message);
  }
}

function processorWith(
  provider: SmsProvider,
  wrap: (store: DeliveryStore) => DeliveryStore = (store) => store,
) {
  const { logger, saw } = capturingLogger();
  const gate = new DatabaseGate({ probe: () => worker.sql`select 1`, probeIntervalMs: 50, logger });
  const deliver = createDeliveryProcessor({
    db: worker.db,
    store: wrap(createDeliveryStore(worker.sql, testContentVault(worker.sql))),
    providers: simulatorProviders({ sms: provider }),
    policy: { maxAttempts: 5, baseDelayMs: 20, maxDelayMs: 600_000 },
    logger,
    now: () => new Date(),
    random: () => 0.5,
    database: gate,
  });
  const run = (messageId: string) =>
    deliver({ data: { messageId }, moveToDelayed: async () => {} } as unknown as Job<DeliveryJobData>);
  return { run, gate, saw };
}

/** Resolves once the worker says it holds an outcome; fails if the delivery ends first. */
async function untilHeld(delivering: Promise<void>, saw: (text: string) => boolean): Promise<void> {
  const ended = delivering.then(
    () => {
      throw new Error("the delivery finished without holding its outcome");
    },
    (error: unknown) => {
      throw new Error(`the delivery failed without holding its outcome: ${String(error)}`);
    },
  );
  await Promise.race([
    eventually(async () => (saw(HELD) ? true : undefined), 10_000, "the outcome to be held"),
    ended,
  ]);
}

async function accept(): Promise<string> {
  const response = await sendSms(h, apiKey, {
    payload: { to: "+14155550100", body: "held", sender: "ACME" },
  });
  expect(response.status).toBe(202);
  return ((await response.json()) as { request_id: string }).request_id;
}

const injectFault = (messageId: string, sqlState: string) =>
  admin`insert into injected_faults (message_id, sql_state) values (${messageId}, ${sqlState})`.then(
    () => {},
  );
const clearFault = (messageId: string) => admin`delete from injected_faults where message_id = ${messageId}`;

describe("given the provider has answered and recording its outcome fails", () => {
  it("when the append waits behind a lock until statement_timeout cancels it (57014), then the outcome is held and recorded once the lock goes, and the message is sent once", async () => {
    const id = await accept();
    let release: () => void = () => {};
    let transaction: Promise<unknown> = Promise.resolve();
    const provider = new ProviderThat(async () => {
      // A migration takes the table while the provider is working: appends wait, reads do not.
      const locked = new Promise<void>((resolve) => {
        transaction = admin.begin(async (tx) => {
          await tx`lock table message_events in exclusive mode`;
          resolve();
          await new Promise<void>((done) => (release = done));
        });
      });
      await locked;
    });
    const { run, saw } = processorWith(provider);

    const delivering = run(id);
    try {
      await untilHeld(delivering, saw);
    } finally {
      release();
      await transaction;
    }
    await delivering;

    expect(provider.calls).toBe(1);
    expect(shapeOf(await eventsOf(h.db, id))).toEqual(["accepted", "pending:attempt_started", "success"]);
  });

  it("when a receipt came during the attempt and reading the message again then fails, then the outcome is held and recorded on top of the receipt, not sent again", async () => {
    const id = await accept();
    let failNextLoad = false;
    const provider = new ProviderThat(async () => {
      // The carrier's receipt beats the provider's answer: the outcome's append will conflict.
      const outcome = await recordReceipt(h.deps.store, {
        messageId: id,
        channel: "sms",
        receipt: {
          state: "sent",
          errorCode: null,
          provider: "recording",
          providerStatus: "sent",
          providerMessageId: null,
        },
        now: new Date(),
      });
      expect(outcome).toBe("recorded");
      failNextLoad = true;
    });
    const { run } = processorWith(provider, (store) => ({
      ...store,
      load: async (messageId) => {
        if (failNextLoad) {
          failNextLoad = false;
          // What a statement cancelled by statement_timeout looks like.
          throw Object.assign(new Error("canceling statement due to statement timeout"), { code: "57014" });
        }
        return store.load(messageId);
      },
    }));

    await run(id);

    expect(failNextLoad).toBe(false);
    expect(provider.calls).toBe(1);
    const shape = shapeOf(await eventsOf(h.db, id));
    expect(shape[0]).toBe("accepted");
    expect(shape.at(-1)).toBe("success");
    expect(shape.filter((event) => event.startsWith("pending:attempt_started"))).toHaveLength(1);
    expect(shape.some((event) => event.startsWith("receipt"))).toBe(true);
  });

  it("when Postgres refuses it with an error the database gate does not count as an outage (40001), then it is held and recorded later, not sent again", async () => {
    const id = await accept();
    const provider = new ProviderThat((message) => injectFault(message.messageId, "40001"));
    const { run, saw } = processorWith(provider);

    const delivering = run(id);
    try {
      await untilHeld(delivering, saw);
    } finally {
      await clearFault(id);
    }
    await delivering;

    expect(provider.calls).toBe(1);
    expect(shapeOf(await eventsOf(h.db, id))).toEqual(["accepted", "pending:attempt_started", "success"]);
  });

  it("when the worker shuts down while an outcome is held, then the processor gives up at once", async () => {
    const id = await accept();
    const provider = new ProviderThat((message) => injectFault(message.messageId, "40001"));
    const { run, gate, saw } = processorWith(provider);

    const delivering = run(id);
    try {
      await untilHeld(delivering, saw);
      gate.close();
      await expect(delivering).rejects.toMatchObject({ code: "40001" });
    } finally {
      await clearFault(id);
    }
  });

  it("when the append breaks a constraint (class 23), then it is not held: the error goes to BullMQ", async () => {
    const id = await accept();
    const provider = new ProviderThat((message) => injectFault(message.messageId, "23514"));
    const { run, saw } = processorWith(provider);

    try {
      await expect(run(id)).rejects.toMatchObject({ code: "23514" });
      expect(saw(HELD)).toBe(false);
    } finally {
      await clearFault(id);
    }
  });
});
