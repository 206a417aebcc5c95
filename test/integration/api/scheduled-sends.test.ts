import { createECDH, randomBytes } from "node:crypto";
import { eq, sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { deliveryOutbox, messageEvents, scheduledDeliveries } from "../../../db/schema.js";
import {
  createHarness,
  eventually,
  expectError,
  getMessage,
  onboard,
  sendNotification,
  sendSms,
} from "../../support/harness.js";

// Scheduled sends and cancellation (issue 20, docs/decisions/0044), through the in-process app on
// the real Postgres and Redis. `idle` runs no worker: its messages stay where the accept put them.
const idle = createHarness();
/** Runs the worker (its relay and its scheduled-sends loop, as the worker process does). */
const live = createHarness();

let idleOrg: Awaited<ReturnType<typeof onboard>>;
let otherOrg: Awaited<ReturnType<typeof onboard>>;
let liveOrg: Awaited<ReturnType<typeof onboard>>;

beforeAll(async () => {
  live.startWorker();
  [idleOrg, otherOrg, liveOrg] = await Promise.all([onboard(idle), onboard(idle), onboard(live)]);
});

afterAll(async () => {
  await Promise.all([idle.close(), live.close()]);
});

const SMS = { to: "+14155550100", body: "See you at 9", sender: "ACME" };
const inSeconds = (seconds: number) => new Date(Date.now() + seconds * 1000).toISOString();

async function accepted(response: Response): Promise<string> {
  expect(response.status).toBe(202);
  return ((await response.json()) as { request_id: string }).request_id;
}

async function record(apiKey: string, id: string, harness = idle) {
  const response = await getMessage(harness, apiKey, id);
  expect(response.status).toBe(200);
  return (await response.json()) as Record<string, unknown>;
}

function cancel(apiKey: string, id: string, harness = idle) {
  return harness.app.request(`/api/v1/messages/${id}/cancel`, {
    method: "POST",
    headers: { "x-api-key": apiKey },
  });
}

async function acceptedEventData(id: string, harness = idle) {
  const [row] = await harness.db
    .select({ data: messageEvents.data })
    .from(messageEvents)
    .where(sql`${messageEvents.messageId} = ${id} and ${messageEvents.seq} = 1`);
  return row?.data as Record<string, unknown>;
}

describe("POST /api/v1/notifications/{channel} with send_at", () => {
  it("accepts at once, shows send_at on the record, and keeps the message in scheduled_deliveries, not the outbox", async () => {
    const sendAt = new Date(Date.now() + 3_600_000);
    const id = await accepted(
      await sendSms(idle, idleOrg.apiKey, { payload: SMS, send_at: sendAt.toISOString() }),
    );
    expect(await record(idleOrg.apiKey, id)).toMatchObject({
      status: "accepted",
      send_at: sendAt.toISOString(),
      status_reason: null,
    });
    const [waiting] = await idle.db
      .select()
      .from(scheduledDeliveries)
      .where(eq(scheduledDeliveries.messageId, id));
    expect(waiting?.dueAt.getTime()).toBe(sendAt.getTime());
    expect(await idle.db.select().from(deliveryOutbox).where(eq(deliveryOutbox.messageId, id))).toEqual([]);
  });

  it("takes an offset other than Z as the same instant, and counts the tier's time-to-live from send_at", async () => {
    const id = await accepted(
      await sendSms(idle, idleOrg.apiKey, {
        payload: SMS,
        notification_type: "OTP",
        send_at: offsetForm(new Date(Date.now() + 2 * 3_600_000), "+05:30"),
      }),
    );
    const { send_at } = await record(idleOrg.apiKey, id);
    const data = await acceptedEventData(id);
    // critical: 10 minutes from send_at, not from acceptance.
    expect(Date.parse(data.expiresAt as string) - Date.parse(send_at as string)).toBe(10 * 60_000);
    expect(data.sendAt).toBe(send_at);
  });

  it("goes to the outbox at once when send_at is now (a moment ago counts as now)", async () => {
    const id = await accepted(
      await sendSms(idle, idleOrg.apiKey, {
        payload: SMS,
        send_at: new Date(Date.now() - 200).toISOString(),
      }),
    );
    expect(await idle.db.select().from(deliveryOutbox).where(eq(deliveryOutbox.messageId, id))).toHaveLength(
      1,
    );
    expect(
      await idle.db.select().from(scheduledDeliveries).where(eq(scheduledDeliveries.messageId, id)),
    ).toEqual([]);
  });

  it("refuses a send_at in the past, past 35 days, without an offset or not a date, with a 400 naming it; nothing is stored", async () => {
    const cases: Array<[unknown, RegExp]> = [
      [inSeconds(-60), /send_at is in the past/],
      [inSeconds(35 * 86_400 + 60), /send_at is more than 35 days ahead/],
      ["2030-01-01T10:00:00", /send_at.*RFC 3339/],
      ["tomorrow", /send_at.*RFC 3339/],
      [1767225600, /send_at/],
    ];
    for (const [sendAt, error] of cases) {
      await expectError(await sendSms(idle, otherOrg.apiKey, { payload: SMS, send_at: sendAt }), 400, error);
    }
    const [{ n } = { n: -1 }] = await idle.db
      .select({ n: sql<number>`count(*)::int` })
      .from(scheduledDeliveries)
      .innerJoin(sql`messages m`, sql`m.message_id = ${scheduledDeliveries.messageId}`)
      .where(sql`m.organization_id = ${otherOrg.id}`);
    expect(n).toBe(0);
  });

  it("works for push too, and a dry run checks send_at", async () => {
    const push = {
      payload: {
        to: { endpoint: "https://push.simulator.notify.test/ok", keys: { p256dh: P256DH, auth: AUTH } },
        title: "Later",
        body: "It is time",
      },
      send_at: inSeconds(600),
    };
    const id = await accepted(await sendNotification(idle, "push", idleOrg.apiKey, push));
    expect((await record(idleOrg.apiKey, id)).send_at).toBe(push.send_at);
    const dry = await sendSms(
      idle,
      idleOrg.apiKey,
      { payload: SMS, send_at: inSeconds(-60) },
      {},
      "?dry_run=true",
    );
    await expectError(dry, 400, /in the past/);
  });

  it("replays the same Idempotency-Key with the same send_at, and refuses it with another (422)", async () => {
    const sendAt = inSeconds(3600);
    const headers = { "Idempotency-Key": `sched-${Date.now()}` };
    const first = await accepted(
      await sendSms(idle, idleOrg.apiKey, { payload: SMS, send_at: sendAt }, headers),
    );
    const again = await sendSms(idle, idleOrg.apiKey, { payload: SMS, send_at: sendAt }, headers);
    expect(again.headers.get("Idempotent-Replayed")).toBe("true");
    expect(await accepted(again)).toBe(first);
    await expectError(
      await sendSms(idle, idleOrg.apiKey, { payload: SMS, send_at: inSeconds(7200) }, headers),
      422,
    );
  });

  it("replays a scheduled send whose 202 was lost even once its send_at has passed (no 400)", async () => {
    const sendAt = inSeconds(60);
    const headers = { "Idempotency-Key": `late-${Date.now()}` };
    const first = await accepted(
      await sendSms(idle, idleOrg.apiKey, { payload: SMS, send_at: sendAt }, headers),
    );
    // The retry comes two minutes later, by the API's clock.
    const clock = idle.deps.now;
    idle.deps.now = () => new Date(Date.now() + 120_000);
    try {
      const retry = await sendSms(idle, idleOrg.apiKey, { payload: SMS, send_at: sendAt }, headers);
      expect(retry.headers.get("Idempotent-Replayed")).toBe("true");
      expect(await accepted(retry)).toBe(first);
      // Without the held key, the same send_at is refused.
      await expectError(
        await sendSms(idle, idleOrg.apiKey, { payload: SMS, send_at: sendAt }),
        400,
        /in the past/,
      );
    } finally {
      idle.deps.now = clock;
    }
  });
});

describe("GET /api/v1/messages?scheduled=", () => {
  it("true lists only the scheduled sends still waiting; false every other message", async () => {
    const org = await onboard(idle);
    const waiting = await accepted(
      await sendSms(idle, org.apiKey, { payload: SMS, send_at: inSeconds(3600) }),
    );
    const now = await accepted(await sendSms(idle, org.apiKey, { payload: SMS }));
    const canceled = await accepted(
      await sendSms(idle, org.apiKey, { payload: SMS, send_at: inSeconds(3600) }),
    );
    expect((await cancel(org.apiKey, canceled)).status).toBe(200);
    const list = async (scheduled: string) => {
      const response = await idle.app.request(`/api/v1/messages?scheduled=${scheduled}`, {
        headers: { "x-api-key": org.apiKey },
      });
      expect(response.status).toBe(200);
      const body = (await response.json()) as { messages: Array<{ message_id: string }> };
      return body.messages.map((m) => m.message_id).sort();
    };
    expect(await list("true")).toEqual([waiting]);
    expect(await list("false")).toEqual([now, canceled].sort());
    await expectError(
      await idle.app.request("/api/v1/messages?scheduled=yes", { headers: { "x-api-key": org.apiKey } }),
      400,
      /scheduled/,
    );
  });
});

describe("POST /api/v1/messages/{message_id}/cancel", () => {
  it("cancels a scheduled message: rejected, status_reason canceled, in its history; again answers the same", async () => {
    const id = await accepted(
      await sendSms(idle, idleOrg.apiKey, { payload: SMS, send_at: inSeconds(3600) }),
    );
    const first = await cancel(idleOrg.apiKey, id);
    expect(first.status).toBe(200);
    const canceled = (await first.json()) as Record<string, unknown>;
    expect(canceled).toMatchObject({
      message_id: id,
      status: "rejected",
      status_reason: "canceled",
      retry_count: 0,
    });
    const again = await cancel(idleOrg.apiKey, id);
    expect(again.status).toBe(200);
    expect(await again.json()).toEqual(canceled);
    expect(await record(idleOrg.apiKey, id)).toEqual(canceled);
    const history = await idle.app.request(`/api/v1/messages/${id}/events`, {
      headers: { "x-api-key": idleOrg.apiKey },
    });
    const { events } = (await history.json()) as { events: Array<{ type: string; reason?: string }> };
    expect(events.map((e) => e.type)).toEqual(["accepted", "rejected"]);
    expect(JSON.stringify(events[1])).toContain("canceled");
  });

  it("is a 404 for an unknown id and for another organization's message, identical; 400 for a bad id", async () => {
    const id = await accepted(
      await sendSms(idle, idleOrg.apiKey, { payload: SMS, send_at: inSeconds(3600) }),
    );
    const foreign = await expectError(await cancel(otherOrg.apiKey, id), 404);
    const unknown = await expectError(
      await cancel(otherOrg.apiKey, "0190a000-0000-7000-8000-000000000000"),
      404,
    );
    expect(foreign).toBe(unknown);
    await expectError(await cancel(otherOrg.apiKey, "nope"), 400);
    expect(await record(idleOrg.apiKey, id)).toMatchObject({ status: "accepted" });
  });

  it("is a 409 once the first attempt has started or the message ended otherwise", async () => {
    const id = await accepted(await sendSms(live, liveOrg.apiKey, { payload: SMS }));
    await eventually(async () =>
      (await record(liveOrg.apiKey, id, live)).status === "success" ? true : undefined,
    );
    await expectError(
      await cancel(liveOrg.apiKey, id, live),
      409,
      /first attempt has started \(status success\)/,
    );
  });

  it("a message canceled while it waits is never sent: its row leaves for the queue at send_at and the worker finds it final", async () => {
    const sendAt = inSeconds(1);
    const id = await accepted(await sendSms(live, liveOrg.apiKey, { payload: SMS, send_at: sendAt }));
    expect((await cancel(liveOrg.apiKey, id, live)).status).toBe(200);
    await eventually(async () => {
      const rows = await live.db
        .select()
        .from(scheduledDeliveries)
        .where(eq(scheduledDeliveries.messageId, id));
      const outbox = await live.db.select().from(deliveryOutbox).where(eq(deliveryOutbox.messageId, id));
      return rows.length === 0 && outbox.length === 0 ? true : undefined;
    });
    expect(await record(liveOrg.apiKey, id, live)).toMatchObject({
      status: "rejected",
      status_reason: "canceled",
    });
  });
});

describe("a scheduled send is delivered at its send_at (worker running)", () => {
  it("no attempt starts before send_at, and the first starts within a second of it", async () => {
    const ids = await Promise.all(
      [1.5, 2, 2.5].map(async (seconds) => {
        const sendAt = inSeconds(seconds);
        const id = await accepted(await sendSms(live, liveOrg.apiKey, { payload: SMS, send_at: sendAt }));
        return { id, sendAt };
      }),
    );
    for (const { id, sendAt } of ids) {
      const done = await eventually(
        async () => {
          const r = await record(liveOrg.apiKey, id, live);
          return r.status === "success" ? r : undefined;
        },
        15_000,
        "the scheduled message to succeed",
      );
      expect(done.send_at).toBe(sendAt);
      const [started] = await live.db
        .select({ at: messageEvents.occurredAt })
        .from(messageEvents)
        .where(sql`${messageEvents.messageId} = ${id} and ${messageEvents.type} = 'pending'`)
        .orderBy(messageEvents.seq)
        .limit(1);
      const lateness = (started?.at.getTime() ?? 0) - Date.parse(sendAt);
      expect(lateness).toBeGreaterThanOrEqual(0);
      expect(lateness).toBeLessThan(1000);
    }
  });
});

/** A subscription's keys of the right shape (the push channel checks them at acceptance). */
const P256DH = createECDH("prime256v1").generateKeys().toString("base64url");
const AUTH = randomBytes(16).toString("base64url");

function offsetForm(instant: Date, offset: "+05:30"): string {
  const shifted = new Date(instant.getTime() + (5 * 60 + 30) * 60_000);
  return `${shifted.toISOString().slice(0, 23)}${offset}`;
}
