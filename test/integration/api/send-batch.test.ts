import { createECDH, randomBytes, randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { MAX_BATCH_BODY_BYTES, MAX_BATCH_ITEMS } from "../../../src/api/routes/notifications/send-batch.js";
import {
  countMessages,
  createHarness,
  createTemplate,
  expectError,
  getMessage,
  type Harness,
  onboard,
  sendSms,
} from "../../support/harness.js";

// Batch sends (issue 20, docs/decisions/0045) through the in-process app, on the real Postgres and
// Redis: one result per item in order, the valid items committed together, limits by item.
const h = createHarness();
/** The send rate at 5 a second, bursts of 10; a daily quota of 7. */
const limited = createHarness({ SEND_RATE_LIMIT: "5", SEND_RATE_BURST: "10", SEND_DAILY_QUOTA: "1000000" });
const quota = createHarness({ SEND_DAILY_QUOTA: "7" });

let org: Awaited<ReturnType<typeof onboard>>;
beforeAll(async () => {
  org = await onboard(h);
});
afterAll(() => Promise.all([h.close(), limited.close(), quota.close()]));

type Result = { status: number; request_id?: string; error?: string; replayed?: true; retry_after?: number };

function batch(harness: Harness, channel: string, apiKey: string, body: unknown, query = "") {
  return harness.app.request(`/api/v1/notifications/${channel}/batch${query}`, {
    method: "POST",
    headers: { "content-type": "application/json", "x-api-key": apiKey },
    body: typeof body === "string" ? body : JSON.stringify(body),
  });
}

async function resultsOf(response: Response): Promise<Result[]> {
  expect(response.status).toBe(207);
  const body = (await response.json()) as { results: Result[] };
  expect(Object.keys(body)).toEqual(["results"]);
  return body.results;
}

const sms = (to = "+14155550100", extra: Record<string, unknown> = {}) => ({
  payload: { to, body: `batch ${randomUUID()}`, sender: "ACME" },
  ...extra,
});

describe("POST /api/v1/notifications/sms/batch", () => {
  it("answers one result per item, in order: valid items accepted, the others refused alone", async () => {
    const before = await countMessages(h, org.id);
    const items = [
      sms(),
      sms("not a number"),
      { ...sms(), surprise: true },
      sms("+14155550101", { notification_type: "OTP" }),
      sms("+14155550102", { send_at: new Date(Date.now() - 60_000).toISOString() }),
      { payload: { to: "+14155550103", body: "nul \u0000 inside" } },
      "not an object",
      sms("+14155550104", { send_at: new Date(Date.now() + 3_600_000).toISOString() }),
    ];
    const results = await resultsOf(await batch(h, "sms", org.apiKey, items));
    expect(results.map((r) => r.status)).toEqual([202, 400, 400, 202, 400, 400, 400, 202]);
    expect(results[0]).toMatchObject({ segments: 1, encoding: "GSM-7" });
    expect(results[1]?.error).toMatch(/payload\.to/);
    expect(results[2]?.error).toMatch(/surprise/);
    expect(results[4]?.error).toMatch(/send_at is in the past/);
    expect(results[5]?.error).toMatch(/NUL/);
    expect(await countMessages(h, org.id)).toBe(before + 3);
    for (const index of [0, 3, 7]) {
      const response = await getMessage(h, org.apiKey, results[index]?.request_id ?? "");
      expect(response.status).toBe(200);
    }
    const otp = (await (await getMessage(h, org.apiKey, results[3]?.request_id ?? "")).json()) as {
      payload: { priority: string };
    };
    expect(otp.payload.priority).toBe("critical");
  });

  it("commits the accepted items in one transaction (more of them than one statement of single sends takes)", async () => {
    const results = await resultsOf(
      await batch(
        h,
        "sms",
        org.apiKey,
        Array.from({ length: 300 }, (_, i) => sms(`+1415555${String(1000 + i)}`)),
      ),
    );
    const ids = results.map((r) => r.request_id ?? "");
    expect(results.every((r) => r.status === 202)).toBe(true);
    const [row] = await h.sql<Array<{ n: number }>>`
      select count(distinct transaction_id)::int as n from message_events where message_id = any(${ids}::uuid[])`;
    expect(row?.n).toBe(1);
  });

  it("replays an item's idempotency_key with the same item, refuses it with another, within a batch too", async () => {
    const key = `batch-${randomUUID()}`;
    const item = sms("+14155550110", { idempotency_key: key });
    const [first] = await resultsOf(await batch(h, "sms", org.apiKey, [item]));
    expect(first?.status).toBe(202);
    const again = await resultsOf(
      await batch(h, "sms", org.apiKey, [
        item,
        { ...item, payload: { ...item.payload, body: "other" } },
        item,
      ]),
    );
    const replayed = {
      status: 202,
      request_id: first?.request_id,
      replayed: true,
      segments: 1,
      encoding: "GSM-7",
    };
    expect(again).toEqual([
      replayed,
      { status: 422, error: expect.stringMatching(/idempotency_key/) },
      replayed,
    ]);
  });

  it("validates without storing anything on ?dry_run=true", async () => {
    const before = await countMessages(h, org.id);
    const results = await resultsOf(await batch(h, "sms", org.apiKey, [sms(), sms("nope")], "?dry_run=true"));
    expect(results.map((r) => r.status)).toEqual([200, 400]);
    expect(await countMessages(h, org.id)).toBe(before);
  });

  it("refuses a body that is not an array of 1 to 500 items, and one over the size limit", async () => {
    await expectError(await batch(h, "sms", org.apiKey, sms()), 400, /JSON array/);
    await expectError(await batch(h, "sms", org.apiKey, []), 400, /1 to 500 items; it holds 0/);
    const many = Array.from({ length: MAX_BATCH_ITEMS + 1 }, () => sms());
    await expectError(await batch(h, "sms", org.apiKey, many), 400, /it holds 501/);
    await expectError(await batch(h, "sms", org.apiKey, "[{"), 400, /Malformed JSON/);
    const huge = JSON.stringify([
      { payload: { to: "+14155550100", body: "x".repeat(MAX_BATCH_BODY_BYTES) } },
    ]);
    await expectError(await batch(h, "sms", org.apiKey, huge), 413);
  });

  it("takes 500 SMS of about 300 bytes each in one request", async () => {
    const items = Array.from({ length: MAX_BATCH_ITEMS }, (_, i) =>
      sms(`+1415556${String(1000 + i)}`, { idempotency_key: `big-${randomUUID()}` }),
    );
    const results = await resultsOf(await batch(h, "sms", org.apiKey, items));
    expect(results.filter((r) => r.status === 202)).toHaveLength(MAX_BATCH_ITEMS);
  });
});

describe("batch sends of e-mail and push", () => {
  it("accept their channel's items, each checked by its channel's rules", async () => {
    await createTemplate(h, org.apiKey, { name: "batch", code: "<p>Hi *|NAME|*</p>" });
    const email = (to: string) => ({
      payload: {
        template_name: "batch",
        message: { from_email: "hello@acme.test", subject: "Hi", to: [{ email: to }] },
      },
    });
    const emails = await resultsOf(
      await batch(h, "email", org.apiKey, [email("ada@example.com"), email("not-an-address")]),
    );
    expect(emails.map((r) => r.status)).toEqual([202, 400]);
    const ecdh = createECDH("prime256v1");
    ecdh.generateKeys();
    const push = {
      payload: {
        to: {
          endpoint: "https://push.example.test/send/abc",
          keys: {
            p256dh: ecdh.getPublicKey().toString("base64url"),
            auth: randomBytes(16).toString("base64url"),
          },
        },
        title: "Shipped",
        body: "Tuesday",
      },
    };
    const pushes = await resultsOf(await batch(h, "push", org.apiKey, [push, { payload: { to: {} } }]));
    expect(pushes.map((r) => r.status)).toEqual([202, 400]);
  });
});

describe("limits count items, not requests", () => {
  it("the send rate: items past the bucket are 429 (with Retry-After), those before it are sent", async () => {
    const o = await onboard(limited);
    const response = await batch(limited, "sms", o.apiKey, [
      sms("bad"),
      ...Array.from({ length: 14 }, () => sms()),
    ]);
    expect(response.headers.get("Retry-After")).toMatch(/^\d+$/);
    expect(response.headers.get("RateLimit-Remaining")).toBe("0");
    const results = await resultsOf(response);
    expect(results[0]?.status).toBe(400);
    expect(results.slice(1, 11).every((r) => r.status === 202)).toBe(true);
    expect(results.slice(11).every((r) => r.status === 429 && r.error?.includes("5 messages a second"))).toBe(
      true,
    );
    expect(results[11]?.retry_after).toBeGreaterThanOrEqual(1);
    expect(await countMessages(limited, o.id)).toBe(10);
    // The bucket is empty for single sends too.
    await expectError(await sendSms(limited, o.apiKey, sms()), 429);
  });

  it("the daily quota: items past it are 429 until midnight; the next single send too", async () => {
    const o = await onboard(quota);
    const results = await resultsOf(
      await batch(
        quota,
        "sms",
        o.apiKey,
        Array.from({ length: 10 }, () => sms()),
      ),
    );
    expect(results.map((r) => r.status)).toEqual([202, 202, 202, 202, 202, 202, 202, 429, 429, 429]);
    expect(results[7]?.error).toMatch(/Daily quota reached/);
    await expectError(await sendSms(quota, o.apiKey, sms()), 429, /Daily quota/);
  });

  it("an item refused by the quota says so (not the rate's words), and a held idempotency_key still gets its replay", async () => {
    const both = createHarness({ SEND_RATE_LIMIT: "5", SEND_RATE_BURST: "10", SEND_DAILY_QUOTA: "4" });
    try {
      const o = await onboard(both);
      const keyed = sms("+14155550130", { idempotency_key: "lost-207" });
      const [first] = await resultsOf(await batch(both, "sms", o.apiKey, [keyed]));
      expect(first?.status).toBe(202);
      const response = await batch(both, "sms", o.apiKey, [
        ...Array.from({ length: 12 }, () => sms()),
        keyed,
      ]);
      const results = await resultsOf(response);
      expect(results.slice(0, 3).map((r) => r.status)).toEqual([202, 202, 202]);
      // Items 4-9 got a token but no unit of the quota; 10-12 no token.
      expect(results.slice(3, 9).every((r) => r.status === 429 && /Daily quota/.test(r.error ?? ""))).toBe(
        true,
      );
      expect(
        results.slice(9, 12).every((r) => r.status === 429 && /messages a second/.test(r.error ?? "")),
      ).toBe(true);
      // The retry of the first batch's item, past both limits, is its replay.
      expect(results[12]).toMatchObject({ status: 202, request_id: first?.request_id, replayed: true });
      expect(Number(response.headers.get("Retry-After"))).toBeGreaterThan(60);
    } finally {
      await both.close();
    }
  });

  it("replays and dry runs take none of the day's quota", async () => {
    const o = await onboard(quota);
    const item = sms("+14155550120", { idempotency_key: "q-1" });
    for (let i = 0; i < 3; i++) {
      const [result] = await resultsOf(await batch(quota, "sms", o.apiKey, [item]));
      expect(result?.status).toBe(202);
    }
    await resultsOf(
      await batch(
        quota,
        "sms",
        o.apiKey,
        Array.from({ length: 10 }, () => sms()),
        "?dry_run=true",
      ),
    );
    const rest = await resultsOf(
      await batch(
        quota,
        "sms",
        o.apiKey,
        Array.from({ length: 6 }, () => sms()),
      ),
    );
    expect(rest.every((r) => r.status === 202)).toBe(true);
    await expectError(await sendSms(quota, o.apiKey, sms()), 429, /Daily quota/);
  });
});
