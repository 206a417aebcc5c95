import postgres from "postgres";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  countMessages,
  createHarness,
  eventually,
  getMessage,
  type Harness,
  onboard,
  sendSms,
} from "../../support/harness.js";
import { createOwnDatabase } from "../../support/own-database.js";

/**
 * A statement that stalls (a migration or `npm run projections:rebuild` holding a lock on
 * `messages`): the requests that arrive meanwhile wait for the database in a bounded queue, one
 * more is refused at once, and a request answered 503 at its deadline is never committed later.
 * The lock is taken in a database of this file's own, so no other test file stalls with it.
 */
const REQUEST_TIMEOUT_MS = 2000;
const QUEUE_LIMIT = 4;

let own: Awaited<ReturnType<typeof createOwnDatabase>>;
let h: Harness;
let locker: postgres.Sql;
let organization: Awaited<ReturnType<typeof onboard>>;

beforeAll(async () => {
  own = await createOwnDatabase("stall");
  h = createHarness({
    DATABASE_URL: own.url,
    REQUEST_TIMEOUT_MS: String(REQUEST_TIMEOUT_MS),
    DATABASE_QUEUE_LIMIT: String(QUEUE_LIMIT),
  });
  locker = postgres(own.url, { max: 1, onnotice: () => {} });
  organization = await onboard(h);
});

afterAll(async () => {
  await h?.close();
  await locker?.end();
  await own?.drop();
});

const sms = (body: string) => ({ payload: { to: "+14155550100", body, sender: "ACME" } });

/** Holds `LOCK TABLE messages` in a transaction of its own until `release()`. */
async function lockMessages() {
  let release: () => void = () => {};
  const released = new Promise<void>((resolve) => (release = resolve));
  let locked: () => void = () => {};
  const isLocked = new Promise<void>((resolve) => (locked = resolve));
  const transaction = locker.begin(async (tx) => {
    await tx`lock table messages in access exclusive mode`;
    locked();
    await released;
  });
  await isLocked;
  return {
    async release() {
      release();
      await transaction;
    },
  };
}

/** Resolves once a statement of the harness is waiting on the lock (the batch in flight). */
function statementWaitingOnLock(text: string) {
  return eventually(async () => {
    const [row] = await h.sql<Array<{ n: number }>>`
      select count(*)::int as n from pg_stat_activity
      where datname = current_database() and wait_event_type = 'Lock' and query like ${`%${text}%`}`;
    return (row?.n ?? 0) > 0 ? true : undefined;
  }, 5000);
}

/** A request's status, headers and how long it took. */
async function timed(request: Response | Promise<Response>) {
  const started = performance.now();
  const response = await request;
  return {
    status: response.status,
    retryAfter: response.headers.get("retry-after"),
    body: (await response.json()) as { error?: string; request_id?: string },
    elapsedMs: performance.now() - started,
  };
}

describe("given a statement on messages stalled behind a lock", () => {
  it("when sends pile up, then those past the queue bound get 503 at once and those past their deadline are never committed", async () => {
    const before = await countMessages(h, organization.id);
    const lock = await lockMessages();
    let released = false;
    try {
      // The first send's statement reaches Postgres and waits on the lock: the batch in flight.
      const inFlight = timed(sendSms(h, organization.apiKey, sms("in flight")));
      await statementWaitingOnLock("insert into idempotency_keys");
      // Then more than the queue holds, all at once.
      const piled = await Promise.all(
        Array.from({ length: QUEUE_LIMIT + 3 }, (_, i) =>
          timed(sendSms(h, organization.apiKey, sms(`piled ${i}`))),
        ),
      );
      const first = await inFlight;

      for (const response of [first, ...piled]) {
        expect(response.status).toBe(503);
        expect(Number(response.retryAfter)).toBeGreaterThan(0);
        expect(Object.keys(response.body)).toEqual(["error"]);
      }
      const atOnce = piled.filter((r) => r.elapsedMs < REQUEST_TIMEOUT_MS / 2);
      expect(atOnce).toHaveLength(3);
      // The others were answered by the request deadline. An item joins the queue after its
      // request began, so its own deadline ends at most REQUEST_TIMEOUT_MS after that 503.
      await new Promise((resolve) => setTimeout(resolve, REQUEST_TIMEOUT_MS));
      await lock.release();
      released = true;

      // The service recovers: the next send is committed.
      const after = await sendSms(h, organization.apiKey, sms("after the stall"));
      expect(after.status).toBe(202);
      // The batch that was in flight commits when the lock goes (its client had a 503: nothing can
      // take back a statement Postgres is running); none of the requests waiting behind it does.
      expect(await countMessages(h, organization.id)).toBe(before + 2);
    } finally {
      if (!released) await lock.release();
    }
  });

  it("when reads pile up, then those past the queue bound get 503 at once", async () => {
    const sent = await sendSms(h, organization.apiKey, sms("to read"));
    expect(sent.status).toBe(202);
    const { request_id: id } = (await sent.json()) as { request_id: string };
    const lock = await lockMessages();
    try {
      const inFlight = timed(getMessage(h, organization.apiKey, id));
      await statementWaitingOnLock("from messages m");
      const piled = await Promise.all(
        Array.from({ length: QUEUE_LIMIT + 3 }, () => timed(getMessage(h, organization.apiKey, id))),
      );
      await inFlight;
      expect(piled.every((r) => r.status === 503 && Number(r.retryAfter) > 0)).toBe(true);
      expect(piled.filter((r) => r.elapsedMs < REQUEST_TIMEOUT_MS / 2)).toHaveLength(3);
    } finally {
      await lock.release();
    }
    expect((await getMessage(h, organization.apiKey, id)).status).toBe(200);
  });
});
