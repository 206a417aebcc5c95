import { afterAll, describe, expect, it } from "vitest";
import { createApp } from "../../../src/api/app.js";
import { createHarness, eventually, onboard, sendSms } from "../../support/harness.js";

const h = createHarness({ AUTH_CACHE_TTL_MS: "0" });
afterAll(() => h.close());

interface Page {
  messages: { message_id: string; status: string; channel: string; created_at: string }[];
  next_cursor: string | null;
}

const T0 = Date.parse("2026-03-01T12:00:00.000Z");

/** An app whose clock the test sets, so `created_at` is known. */
function appAt(clock: { now: number }) {
  return createApp({ ...h.deps, now: () => new Date(clock.now) });
}

async function send(apiKey: string, app = h.app, to = "+14155550100") {
  const response = await sendSms({ ...h, app }, apiKey, { payload: { to, body: "hello" } });
  expect(response.status).toBe(202);
  return ((await response.json()) as { request_id: string }).request_id;
}

/** Sends one message per time given, in that order; returns their ids. */
async function sendAt(apiKey: string, times: number[]) {
  const clock = { now: 0 };
  const app = appAt(clock);
  const ids = [];
  for (const time of times) {
    clock.now = time;
    ids.push(await send(apiKey, app));
  }
  return ids;
}

function list(apiKey: string, query = "") {
  return h.app.request(`/api/v1/messages${query}`, { headers: { "x-api-key": apiKey } });
}

async function page(apiKey: string, query = ""): Promise<Page> {
  const response = await list(apiKey, query);
  expect(response.status, await response.clone().text()).toBe(200);
  return (await response.json()) as Page;
}

/** Every page, following `next_cursor`. */
async function allPages(apiKey: string, query: string) {
  const pages: Page[] = [];
  let cursor: string | null = null;
  do {
    const next: Page = await page(apiKey, `${query}${cursor ? `&cursor=${cursor}` : ""}`);
    pages.push(next);
    cursor = next.next_cursor;
  } while (cursor && pages.length < 50);
  return pages;
}

const ids = (p: Page) => p.messages.map((m) => m.message_id);

describe("GET /api/v1/messages", () => {
  it("lists the organization's messages newest first, each as GET /messages/{id} shows it", async () => {
    const org = await onboard(h);
    const [first, second, third] = await sendAt(org.apiKey, [T0, T0 + 1000, T0 + 2000]);
    const result = await page(org.apiKey);
    expect(ids(result)).toEqual([third, second, first]);
    expect(result.next_cursor).toBeNull();
    const one = await h.app.request(`/api/v1/messages/${first}`, { headers: { "x-api-key": org.apiKey } });
    expect(result.messages[2]).toEqual(await one.json());
  });

  it("is empty for an organization with no messages", async () => {
    const org = await onboard(h);
    expect(await page(org.apiKey)).toEqual({ messages: [], next_cursor: null });
  });

  it("never lists another organization's messages", async () => {
    const mine = await onboard(h);
    const theirs = await onboard(h);
    const myId = await send(mine.apiKey);
    await send(theirs.apiKey);
    expect(ids(await page(mine.apiKey))).toEqual([myId]);
  });

  it("pages through with the cursor, with no duplicates or gaps, breaking created_at ties by message_id", async () => {
    const org = await onboard(h);
    // Four messages share one created_at, so the pages' boundaries fall inside the tie.
    const sent = await sendAt(org.apiKey, [T0, T0 + 1, T0 + 1, T0 + 1, T0 + 1, T0 + 2, T0 + 3]);
    const pages = await allPages(org.apiKey, "?limit=3");
    expect(pages.map((p) => p.messages.length)).toEqual([3, 3, 1]);
    expect(pages.at(-1)?.next_cursor).toBeNull();
    const listed = pages.flatMap(ids);
    expect(new Set(listed).size).toBe(sent.length);
    const expected = sent
      .map((id, i) => ({ id, at: [T0, T0 + 1, T0 + 1, T0 + 1, T0 + 1, T0 + 2, T0 + 3][i] ?? 0 }))
      .sort((a, b) => b.at - a.at || (a.id < b.id ? 1 : -1))
      .map((m) => m.id);
    expect(listed).toEqual(expected);
  });

  it("keeps later pages stable when messages arrive between requests", async () => {
    const org = await onboard(h);
    const sent = await sendAt(org.apiKey, [T0, T0 + 1000, T0 + 2000, T0 + 3000]);
    const first = await page(org.apiKey, "?limit=2");
    await sendAt(org.apiKey, [T0 + 5000]);
    const second = await page(org.apiKey, `?limit=2&cursor=${first.next_cursor}`);
    expect([...ids(first), ...ids(second)]).toEqual([...sent].reverse());
  });

  it("gives 20 messages a page unless told otherwise", async () => {
    const org = await onboard(h);
    await sendAt(
      org.apiKey,
      Array.from({ length: 21 }, (_, i) => T0 + i),
    );
    const first = await page(org.apiKey);
    expect(first.messages).toHaveLength(20);
    expect(first.next_cursor).toEqual(expect.any(String));
    expect((await page(org.apiKey, `?cursor=${first.next_cursor}`)).messages).toHaveLength(1);
    expect((await page(org.apiKey, "?limit=100")).messages).toHaveLength(21);
  });

  it("filters by created_after and created_before, both exclusive", async () => {
    const org = await onboard(h);
    const [, second, third] = await sendAt(org.apiKey, [T0, T0 + 1000, T0 + 2000, T0 + 3000]);
    const after = new Date(T0).toISOString();
    const before = new Date(T0 + 3000).toISOString();
    expect(ids(await page(org.apiKey, `?created_after=${after}&created_before=${before}`))).toEqual([
      third,
      second,
    ]);
    // Another time zone names the same instant.
    expect(ids(await page(org.apiKey, "?created_after=2026-03-01T13:00:01%2B01:00"))).toHaveLength(2);
  });

  it("filters by status and channel, also while paging", async () => {
    const org = await onboard(h);
    const worker = h.startWorker();
    const rejected = await send(org.apiKey, h.app, "+15005550001");
    const delivered = [await send(org.apiKey), await send(org.apiKey)];
    await eventually(
      async () => {
        const statuses = (await page(org.apiKey)).messages.map((m) => m.status);
        return statuses.every((s) => s === "success" || s === "rejected") ? true : undefined;
      },
      10_000,
      "every message to finish",
    );
    await worker.close();
    expect(ids(await page(org.apiKey, "?status=rejected"))).toEqual([rejected]);
    const successes = (await allPages(org.apiKey, "?status=success&limit=1")).flatMap(ids);
    expect(new Set(successes)).toEqual(new Set(delivered));
    expect(successes).toHaveLength(2);
    expect(await page(org.apiKey, "?status=accepted")).toEqual({ messages: [], next_cursor: null });
    expect((await page(org.apiKey, "?channel=sms")).messages).toHaveLength(3);
    expect((await page(org.apiKey, "?channel=email")).messages).toHaveLength(0);
  });

  describe("refuses a bad filter with 400 naming it", () => {
    const fakeCursor = (text: string) => Buffer.from(text).toString("base64url");
    it.each([
      ["an unknown status", "?status=lost", /^status: must be one of: accepted, pending/],
      ["an unknown channel", "?channel=fax", /^channel: must be one of: email, sms, push$/],
      ["a date without a time", "?created_after=2026-03-01", /^created_after: must be an ISO 8601/],
      ["a date-time without a zone", "?created_before=2026-03-01T12:00:00", /^created_before: /],
      ["a word for a date", "?created_after=yesterday", /^created_after: /],
      ["a limit of 0", "?limit=0", /^limit: must be an integer from 1 to 100$/],
      ["a limit over 100", "?limit=101", /^limit: must be an integer from 1 to 100$/],
      ["a fractional limit", "?limit=1.5", /^limit: /],
      ["a limit that is no number", "?limit=ten", /^limit: /],
      ["a cursor that is not base64url", "?cursor=not%20a%20cursor", /^cursor: is not a cursor/],
      ["a cursor of something else", `?cursor=${fakeCursor("hello")}`, /^cursor: /],
      [
        "a cursor of a date that does not exist",
        `?cursor=${fakeCursor("2026-02-30T00:00:00.000Z|01900000-0000-7000-8000-000000000000")}`,
        /^cursor: /,
      ],
      ["an unknown parameter", "?stauts=failed", /stauts/],
    ])("%s", async (_, query, pattern) => {
      const org = await onboard(h);
      const response = await list(org.apiKey, query);
      expect(response.status).toBe(400);
      const body = (await response.json()) as { error: string };
      expect(Object.keys(body)).toEqual(["error"]);
      expect(body.error).toMatch(pattern);
    });
  });
});
