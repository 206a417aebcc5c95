import { eq } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { messageEvents } from "../../../db/schema.js";
import { createApp } from "../../../src/api/app.js";
import { NOTIFICATION_TYPES } from "../../../src/domain/priority.js";
import {
  countMessages,
  createHarness,
  expectError,
  getMessage,
  onboard,
  sendSms,
  unreachableQueue,
} from "../../support/harness.js";

const h = createHarness({ SMS_DEFAULT_SENDER: "DefaultCo" });
let apiKey = "";
let organizationId = "";
beforeAll(async () => {
  const org = await onboard(h);
  apiKey = org.apiKey;
  organizationId = org.id;
});
afterAll(() => h.close());

const valid = {
  payload: { to: "+14155550100", body: "Your code is 123456", sender: "ACME" },
  retry_enabled: true,
};

describe("POST /api/v1/notifications/sms", () => {
  it("accepts a valid SMS with 202, commits the accepted event, and the relay enqueues its job", async () => {
    const response = await sendSms(h, apiKey, valid);
    expect(response.status).toBe(202);
    const body = (await response.json()) as { message: string; request_id: string };
    expect(body.message).toBe("SMS notification accepted");
    const events = await h.db
      .select()
      .from(messageEvents)
      .where(eq(messageEvents.messageId, body.request_id));
    expect(events.map((e) => [e.seq, e.type, e.retryCount])).toEqual([[1, "accepted", 0]]);
    await h.relayOutbox();
    const job = await h.queue.getJob(body.request_id);
    expect(job?.opts.priority).toBe(3); // medium
  });

  it("can be read back immediately after the 202", async () => {
    const response = await sendSms(h, apiKey, { ...valid, notification_type: "OTP" });
    const { request_id } = (await response.json()) as { request_id: string };
    const read = await getMessage(h, apiKey, request_id);
    expect(read.status).toBe(200);
    const record = (await read.json()) as Record<string, unknown> & { payload: Record<string, unknown> };
    expect(record).toMatchObject({
      message_id: request_id,
      status: "accepted",
      channel: "sms",
      retry_count: 0,
      delivery_time: null,
    });
    expect(record.payload).toMatchObject({
      priority: "critical",
      recipient: "+14155550100",
      sender: "ACME",
      message: valid.payload.body,
    });
  });

  it("takes a character outside the BMP written as an escaped surrogate pair", async () => {
    const response = await sendSms(h, apiKey, '{"payload":{"to":"+14155550100","body":"ok \\ud83d\\ude00"}}');
    expect(response.status).toBe(202);
    const { request_id } = (await response.json()) as { request_id: string };
    const record = (await (await getMessage(h, apiKey, request_id)).json()) as {
      payload: { message: string };
    };
    expect(record.payload.message).toBe("ok \u{1F600}");
  });

  it("normalises the recipient to E.164 and uses the default sender when none is given", async () => {
    const response = await sendSms(h, apiKey, { payload: { to: "+1 (415) 555-0100", body: "hi" } });
    const { request_id } = (await response.json()) as { request_id: string };
    const record = (await (await getMessage(h, apiKey, request_id)).json()) as {
      receiver_id: string;
      sender_id: string;
    };
    expect(record.receiver_id).toBe("+14155550100");
    expect(record.sender_id).toBe("DefaultCo");
  });

  it.each([
    ["OTP", "critical", 1],
    ["DEPENDENCY_FAILURE", "high", 2],
    ["EVENT_REMINDER", "medium", 3],
    ["NEWS_UPDATE", "low", 4],
  ] as const)("gives a %s the %s tier and queue priority %d", async (type, tier, queuePriority) => {
    const response = await sendSms(h, apiKey, { ...valid, notification_type: type });
    const { request_id } = (await response.json()) as { request_id: string };
    const record = (await (await getMessage(h, apiKey, request_id)).json()) as {
      payload: { priority: string };
    };
    expect(record.payload.priority).toBe(tier);
    await h.relayOutbox();
    expect((await h.queue.getJob(request_id))?.opts.priority).toBe(queuePriority);
  });

  it("accepts alphanumeric, short-code and E.164 senders", async () => {
    for (const sender of ["A1", "My Company", "12345", "+14155550199"]) {
      expect((await sendSms(h, apiKey, { payload: { ...valid.payload, sender } })).status).toBe(202);
    }
  });

  it("keeps a backslash followed by u0000, which is text and not a NUL", async () => {
    const text = "path C:\\u0000\\x";
    const response = await sendSms(h, apiKey, { payload: { ...valid.payload, body: text } });
    expect(response.status).toBe(202);
    const { request_id } = (await response.json()) as { request_id: string };
    const record = (await (await getMessage(h, apiKey, request_id)).json()) as {
      payload: { message: string };
    };
    expect(record.payload.message).toBe(text);
  });

  it("defaults retry_enabled to true", async () => {
    const response = await sendSms(h, apiKey, { payload: valid.payload });
    const { request_id } = (await response.json()) as { request_id: string };
    const record = (await (await getMessage(h, apiKey, request_id)).json()) as {
      payload: { retry_enabled: boolean };
    };
    expect(record.payload.retry_enabled).toBe(true);
  });

  describe("refuses bad input with 400, storing nothing", () => {
    it.each([
      ["a missing payload", { retry_enabled: true }, /payload: is required/],
      ["a missing recipient", { payload: { body: "x" } }, /payload\.to/],
      [
        "an invalid phone number",
        { payload: { to: "+1415555010", body: "x" } },
        /payload\.to: must be a valid phone number/,
      ],
      [
        "digits without + and the country code (a US number that would reach New Zealand)",
        { payload: { to: "6465550100", body: "x" } },
        /payload\.to: must be a valid phone number in international format: \+ and the country code/,
      ],
      [
        "digits with the country code but no +",
        { payload: { to: "14155550100", body: "x" } },
        /payload\.to: must be a valid phone number/,
      ],
      ["letters as a phone number", { payload: { to: "call me", body: "x" } }, /payload\.to/],
      [
        "a number inside other text",
        { payload: { to: "call +14155550100 now", body: "x" } },
        /payload\.to: must be a valid phone number/,
      ],
      ["a tel: URI", { payload: { to: "tel:+14155550100", body: "x" } }, /payload\.to/],
      ["a numeric recipient", { payload: { to: 14155550100, body: "x" } }, /payload\.to/],
      ["an empty body", { payload: { to: "+14155550100", body: "" } }, /payload\.body/],
      ["a blank body", { payload: { to: "+14155550100", body: "   " } }, /payload\.body/],
      ["a body over 1600 characters", { payload: { to: "+14155550100", body: "x".repeat(1601) } }, /1600/],
      [
        "a sender over 11 characters",
        { payload: { ...valid.payload, sender: "ABCDEFGHIJKL" } },
        /payload\.sender/,
      ],
      ["a sender with symbols", { payload: { ...valid.payload, sender: "AC!ME" } }, /payload\.sender/],
      ["a string retry_enabled", { ...valid, retry_enabled: "yes" }, /retry_enabled/],
      [
        "an unknown notification type",
        { ...valid, notification_type: "SPAM" },
        /notification_type: must be one of: OTP, /,
      ],
      ["an unknown top-level field", { ...valid, priority: "high" }, /Unrecognized key.*priority/],
      [
        "an unknown payload field",
        { payload: { ...valid.payload, cc: "x" } },
        /payload: Unrecognized key.*cc/,
      ],
      ["a payload that is not an object", { payload: "hello" }, /payload: must be an object/],
    ])("%s", async (_, body, pattern) => {
      const before = await countMessages(h, organizationId);
      await expectError(await sendSms(h, apiKey, body), 400, pattern);
      expect(await countMessages(h, organizationId)).toBe(before);
    });

    it("names every allowed notification type", async () => {
      const error = await expectError(await sendSms(h, apiKey, { ...valid, notification_type: "NOPE" }), 400);
      for (const type of NOTIFICATION_TYPES) expect(error).toContain(type);
    });

    it("a NUL character in a string (Postgres text cannot hold it)", async () => {
      const before = await countMessages(h, organizationId);
      const body = JSON.stringify({ payload: { to: "+14155550100", body: "a\u0000b" } });
      await expectError(await sendSms(h, apiKey, body), 400, /NUL character/);
      expect(await countMessages(h, organizationId)).toBe(before);
    });

    it("a NUL character in a key, at any depth", async () => {
      const before = await countMessages(h, organizationId);
      const nested = { payload: { to: "+14155550100", body: "x", sender: { deep: [{ "k\u0000": 1 }] } } };
      await expectError(await sendSms(h, apiKey, JSON.stringify(nested)), 400, /NUL character/);
      expect(await countMessages(h, organizationId)).toBe(before);
    });

    it.each([
      ["in the body", '{"payload":{"to":"+14155550100","body":"cut \\ud83d"}}'],
      ["in a key", '{"payload":{"to":"+14155550100","body":"x","\\udc00":1}}'],
      ["a low half first", '{"payload":{"to":"+14155550100","body":"\\ude00\\ud83d"}}'],
    ])("an unpaired UTF-16 surrogate %s (Postgres refuses it in JSON)", async (_, body) => {
      const before = await countMessages(h, organizationId);
      await expectError(await sendSms(h, apiKey, body), 400, /unpaired UTF-16 surrogate/);
      expect(await countMessages(h, organizationId)).toBe(before);
    });

    it.each([65, 32_000])("JSON nested %i levels deep", async (depth) => {
      const before = await countMessages(h, organizationId);
      const body = `{"payload":{"to":"+14155550100","body":"x","sender":${"[".repeat(depth)}${"]".repeat(depth)}}}`;
      await expectError(await sendSms(h, apiKey, body), 400, /must not nest deeper than 64 levels/);
      expect(await countMessages(h, organizationId)).toBe(before);
    });

    it("malformed JSON", async () => {
      await expectError(await sendSms(h, apiKey, '{"payload": '), 400, /Malformed JSON/);
    });

    it("a bad dry_run value", async () => {
      await expectError(await sendSms(h, apiKey, valid, {}, "?dry_run=yes"), 400, /dry_run/);
    });
  });

  it("answers 415 for a non-JSON content type", async () => {
    await expectError(
      await sendSms(h, apiKey, valid, { "content-type": "application/x-www-form-urlencoded" }),
      415,
    );
  });

  it("answers 413 for a body over 64 KiB", async () => {
    await expectError(
      await sendSms(h, apiKey, { payload: { ...valid.payload, body: "x".repeat(70_000) } }),
      413,
    );
  });

  it("validates without storing or sending on ?dry_run=true", async () => {
    const before = await countMessages(h, organizationId);
    const response = await sendSms(h, apiKey, valid, {}, "?dry_run=true");
    expect(response.status).toBe(200);
    const body = (await response.json()) as Record<string, unknown>;
    // The spec's `{ message }`, with what the body costs to send (docs/decisions/0043).
    expect(Object.keys(body)).toEqual(["message", "segments", "encoding"]);
    expect(await countMessages(h, organizationId)).toBe(before);
    await expectError(
      await sendSms(h, apiKey, { payload: { to: "nope", body: "x" } }, {}, "?dry_run=true"),
      400,
    );
  });

  it("still authenticates a dry run", async () => {
    await expectError(await sendSms(h, "ntf_wrong", valid, {}, "?dry_run=true"), 401);
  });

  describe("Idempotency-Key", () => {
    it("replays the first 202 for the same key and body, creating nothing", async () => {
      const headers = { "idempotency-key": `replay-${Date.now()}` };
      const first = await sendSms(h, apiKey, valid, headers);
      const before = await countMessages(h, organizationId);
      const second = await sendSms(h, apiKey, valid, headers);
      expect(second.status).toBe(202);
      expect(second.headers.get("idempotent-replayed")).toBe("true");
      expect(first.headers.get("idempotent-replayed")).toBeNull();
      expect(await second.json()).toEqual(await first.json());
      expect(await countMessages(h, organizationId)).toBe(before);
    });

    it("answers 422 when the key is reused with a different body", async () => {
      const headers = { "idempotency-key": `conflict-${Date.now()}` };
      expect((await sendSms(h, apiKey, valid, headers)).status).toBe(202);
      await expectError(
        await sendSms(h, apiKey, { ...valid, retry_enabled: false }, headers),
        422,
        /different/,
      );
    });

    it("creates exactly one message for 20 concurrent identical requests", async () => {
      const headers = { "idempotency-key": `race-${Date.now()}` };
      const before = await countMessages(h, organizationId);
      const responses = await Promise.all(
        Array.from({ length: 20 }, () => sendSms(h, apiKey, valid, headers)),
      );
      expect(responses.map((r) => r.status)).toEqual(Array(20).fill(202));
      const ids = new Set(
        await Promise.all(
          responses.map(async (r) => ((await r.json()) as { request_id: string }).request_id),
        ),
      );
      expect(ids.size).toBe(1);
      expect(await countMessages(h, organizationId)).toBe(before + 1);
      expect(responses.filter((r) => r.headers.get("idempotent-replayed") === "true")).toHaveLength(19);
    });

    it("is scoped to the organization", async () => {
      const other = await onboard(h);
      const headers = { "idempotency-key": `scoped-${Date.now()}` };
      const mine = (await (await sendSms(h, apiKey, valid, headers)).json()) as { request_id: string };
      const theirs = (await (await sendSms(h, other.apiKey, valid, headers)).json()) as {
        request_id: string;
      };
      expect(theirs.request_id).not.toBe(mine.request_id);
    });

    it("refuses an over-long key with 400", async () => {
      await expectError(
        await sendSms(h, apiKey, valid, { "idempotency-key": "k".repeat(256) }),
        400,
        /Idempotency-Key/,
      );
    });
  });

  it("still answers 202 when Redis is unreachable: the API never needs Redis to accept", async () => {
    const { queue: deadQueue, close: closeDeadQueue } = unreachableQueue(h.config.QUEUE_PREFIX);
    try {
      const app = createApp({ ...h.deps, queue: deadQueue });
      const started = Date.now();
      const response = await app.request("/api/v1/notifications/sms", {
        method: "POST",
        headers: { "content-type": "application/json", "x-api-key": apiKey },
        body: JSON.stringify(valid),
      });
      expect(response.status).toBe(202);
      expect(Date.now() - started).toBeLessThan(2000);
      const { request_id } = (await response.json()) as { request_id: string };
      expect(await h.queue.getJob(request_id)).toBeUndefined();
      const record = (await (await getMessage(h, apiKey, request_id)).json()) as { status: string };
      expect(record.status).toBe("accepted");
      // The worker's outbox relay adds the job from the outbox row committed with the message.
      await h.relayOutbox();
      expect(await h.queue.getJob(request_id)).toBeDefined();
    } finally {
      await closeDeadQueue();
    }
  });
});
