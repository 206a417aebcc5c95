import { createECDH } from "node:crypto";
import { asc, inArray } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { messages } from "../../../db/schema.js";
import type { Channel } from "../../../src/domain/events.js";
import type { ReceiptState } from "../../../src/domain/receipts.js";
import { acceptMessage } from "../../../src/messages/accept.js";
import { recordDelay, recordReceipt } from "../../../src/messages/receipts.js";
import type { StoredEvent } from "../../../src/store/events.js";
import { rebuildProjections } from "../../../src/store/rebuild.js";
import {
  createHarness,
  createTemplate,
  eventually,
  onboard,
  sendNotification,
  sendSms,
} from "../../support/harness.js";
import { expectFinishedHistory } from "../workers/history.js";

const h = createHarness();
afterAll(() => h.close());

const RECIPIENTS = [
  "+14155550100",
  "+15005550001",
  "+15005550004",
  "+15005550009",
  "+15005550500",
  "+15005550501",
  "+15005550502",
  "+15005550429",
];
const PUSH_KEY = (() => {
  const ecdh = createECDH("prime256v1");
  ecdh.generateKeys();
  return ecdh.getPublicKey().toString("base64url");
})();
const TYPES = [undefined, "OTP", "DEPENDENCY_FAILURE", "EVENT_REMINDER", "NEWS_UPDATE"];
/** Bodies of every shape the record's segments and encoding take (docs/decisions/0043). */
const BODY_TAILS = ["", ` ${"€".repeat(90)}`, " 😀", ` ${"Ж".repeat(80)}`];

let organizationIds: string[] = [];
let messageIds: string[] = [];
let uncounted = "";

function snapshot() {
  return h.db
    .select()
    .from(messages)
    .where(inArray(messages.organizationId, organizationIds))
    .orderBy(asc(messages.messageId));
}

beforeAll(async () => {
  h.startWorker();
  const organizations = await Promise.all([onboard(h), onboard(h)]);
  organizationIds = organizations.map((o) => o.id);

  // Every simulator recipient × retries on/off, three times over: every tier, both organizations.
  const requests = [0, 1, 2].flatMap((round) =>
    RECIPIENTS.flatMap((to, r) =>
      [true, false].map((retryEnabled, e) => {
        const type = TYPES[(round + r + e) % TYPES.length];
        const organization = organizations[(round + r) % organizations.length];
        if (!organization) throw new Error("no organization");
        return sendSms(h, organization.apiKey, {
          payload: {
            to,
            body: `mixed ${round} ${to} ${retryEnabled}${BODY_TAILS[(round + r + e) % BODY_TAILS.length]}`,
            sender: e ? "+14155550199" : "ACME",
          },
          retry_enabled: retryEnabled,
          ...(type ? { notification_type: type } : {}),
        });
      }),
    ),
  );
  // E-mail and push too: their records carry subject, template_fields and a null body.
  const [first] = organizations;
  if (!first) throw new Error("no organization");
  await createTemplate(h, first.apiKey, { name: "hello", code: "<p>Hello *|NAME|*</p>" });
  const email = (template: string, to: string) => ({
    payload: {
      template_name: template,
      message: {
        from_email: "a@acme.test",
        subject: `Hi ${to}`,
        to: [{ email: to }],
        global_merge_vars: [{ name: "NAME", content: to }],
      },
    },
  });
  const push = (outcome: string) => ({
    payload: {
      to: {
        endpoint: `https://push.simulator.notify.test/${outcome}`,
        keys: { p256dh: PUSH_KEY, auth: "AAAAAAAAAAAAAAAAAAAAAA" },
      },
      title: outcome,
      body: `push ${outcome}`,
    },
  });
  requests.push(
    sendNotification(h, "email", first.apiKey, email("hello", "ada@example.com")),
    sendNotification(h, "email", first.apiKey, email("hello", "transient-once@simulator.notify.test")),
    sendNotification(h, "email", first.apiKey, email("missing", "ada@example.com")),
    sendNotification(h, "push", first.apiKey, push("ok")),
    sendNotification(h, "push", first.apiKey, push("gone")),
    // Scheduled sends: one due in a second (its record keeps send_at), one canceled below.
    sendSms(h, first.apiKey, {
      payload: { to: RECIPIENTS[0], body: "scheduled" },
      send_at: new Date(Date.now() + 1000).toISOString(),
    }),
    sendSms(h, first.apiKey, {
      payload: { to: RECIPIENTS[0], body: "canceled" },
      send_at: new Date(Date.now() + 3_600_000).toISOString(),
    }),
  );
  const responses = await Promise.all(requests);
  messageIds = await Promise.all(
    responses.map(async (response) => {
      expect(response.status).toBe(202);
      return ((await response.json()) as { request_id: string }).request_id;
    }),
  );
  const scheduledToCancel = messageIds.at(-1);
  // And an SMS accepted before segments were counted: its accepted event has neither field.
  const before = await acceptMessage(h.deps, {
    organization: { id: first.id, productId: first.productId, name: first.name, active: true },
    content: { channel: "sms", recipient: "+14155550100", sender: "ACME", body: "accepted before 0043" },
    retryEnabled: true,
    notificationType: undefined,
  });
  if (before.outcome !== "accepted") throw new Error("not accepted");
  uncounted = before.messageId;
  messageIds.push(uncounted);

  const canceled = await h.app.request(`/api/v1/messages/${scheduledToCancel}/cancel`, {
    method: "POST",
    headers: { "x-api-key": first.apiKey },
  });
  expect(canceled.status).toBe(200);

  await eventually(
    async () => {
      const rows = await snapshot();
      const unfinished = rows.filter((row) => row.status === "accepted" || row.status === "pending");
      return rows.length === messageIds.length && unfinished.length === 0 ? true : undefined;
    },
    15_000,
    "every message to finish",
  );

  // Receipts on some of them, in every shape: on a success, a failure and a rejection; several
  // on one message; a duplicate and a late lower one (which append nothing); delays (history
  // only: the first is appended, a second or one after a final receipt is not).
  const RECEIPTS: Array<Array<ReceiptState | "delayed">> = [
    [],
    ["sent"],
    ["sent", "delivered"],
    ["undelivered"],
    ["undelivered", "delivered", "sent"],
    ["delivered", "delivered"],
    ["bounced", "complained"],
    ["delayed"],
    ["delayed", "sent", "delayed", "bounced"],
    ["delivered", "delayed"],
  ];
  let given = 0;
  let delays = 0;
  for (const [index, id] of messageIds.entries()) {
    const states = RECEIPTS[index % RECEIPTS.length] ?? [];
    const { events } = await h.deps.store.loadMessage(id);
    const success = events.find((stored) => stored.event.type === "success")?.event;
    const provider = success?.type === "success" ? success.data.provider : "simulator";
    for (const state of states) {
      if (state === "delayed") {
        const delay = { errorCode: "4.4.1", provider, providerStatus: "delayed" };
        const outcome = await recordDelay(h.deps.store, {
          messageId: id,
          channel: channelOf(events),
          delay,
          now: new Date(),
        });
        if (outcome === "recorded") delays++;
        continue;
      }
      const outcome = await recordReceipt(h.deps.store, {
        messageId: id,
        channel: channelOf(events),
        receipt: {
          state,
          errorCode: state === "undelivered" ? "30003" : null,
          provider,
          providerStatus: state,
          providerMessageId: null,
        },
        now: new Date(),
      });
      if (outcome === "recorded") given++;
    }
  }
  expect(given).toBeGreaterThan(messageIds.length / 3);
  expect(delays).toBeGreaterThan(0);
});

function channelOf(events: readonly StoredEvent[]): Channel {
  const [accepted] = events;
  if (accepted?.event.type !== "accepted") throw new Error("no accepted event");
  return accepted.event.data.channel;
}

describe("projection rebuild", () => {
  it("given a mixed run where every message finished, then each record is the fold of its events", async () => {
    const statuses = new Set<string>();
    const deliveries = new Set<string>();
    for (const id of messageIds) {
      const { row } = await expectFinishedHistory(h.db, id);
      statuses.add(row.status);
      deliveries.add(row.deliveryState);
    }
    expect(statuses).toEqual(new Set(["success", "failed", "rejected"]));
    expect(deliveries).toEqual(
      new Set(["unknown", "sent", "delivered", "undelivered", "bounced", "complained"]),
    );
  });

  it("given that run, when the projections are rebuilt from the events, then every record comes back identical", async () => {
    const before = await snapshot();
    expect(before).toHaveLength(messageIds.length);
    expect(new Set(before.map((row) => row.priority))).toEqual(
      new Set(["critical", "high", "medium", "low"]),
    );
    // Segments and encoding in every shape: SMS ones counted, the uncounted one's and the other
    // channels' null.
    expect(new Set(before.map((row) => `${row.channel} ${row.segments} ${row.encoding}`))).toEqual(
      new Set([
        "sms 1 GSM-7",
        "sms 2 GSM-7",
        "sms 1 UCS-2",
        "sms 2 UCS-2",
        "sms null null",
        "email null null",
        "push null null",
      ]),
    );
    expect(before.find((row) => row.messageId === uncounted)).toMatchObject({
      segments: null,
      encoding: null,
    });

    const written = await rebuildProjections(h.sql);

    const after = await snapshot();
    expect(written).toBeGreaterThanOrEqual(messageIds.length);
    expect(after).toEqual(before);
  });

  it("given a small page size, when rebuilt, then paging neither skips nor repeats a record", async () => {
    const before = await snapshot();
    const total = await h.db.$count(messages);

    const written = await rebuildProjections(h.sql, 7);

    expect(await snapshot()).toEqual(before);
    expect(written).toBeGreaterThanOrEqual(before.length);
    expect(await h.db.$count(messages)).toBeGreaterThanOrEqual(total);
  });
});
