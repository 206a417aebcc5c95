import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createHarness, eventually, getMessage, onboard, sendSms } from "../../support/harness.js";

const h = createHarness({ AUTH_CACHE_TTL_MS: "0", RETRY_BASE_DELAY_MS: "10" });
beforeAll(() => {
  h.startWorker();
});
afterAll(() => h.close());

interface HistoryEntry {
  seq: number;
  type: string;
  kind?: string;
  retry_count: number;
  occurred_at: string;
  [detail: string]: unknown;
}

function getEvents(apiKey: string, messageId: string) {
  return h.app.request(`/api/v1/messages/${messageId}/events`, { headers: { "x-api-key": apiKey } });
}

async function send(apiKey: string, to: string, extra: object = {}) {
  const response = await sendSms(h, apiKey, { payload: { to, body: "Your code is 123456" }, ...extra });
  expect(response.status).toBe(202);
  return ((await response.json()) as { request_id: string }).request_id;
}

/** The message's events once it reached a final state. */
async function finalHistory(apiKey: string, id: string) {
  return eventually(
    async () => {
      const { events } = (await (await getEvents(apiKey, id)).json()) as { events: HistoryEntry[] };
      const last = events.at(-1);
      return last && ["success", "failed", "rejected"].includes(last.type) ? events : undefined;
    },
    10_000,
    `message ${id} to finish`,
  );
}

describe("GET /api/v1/messages/{message_id}/events", () => {
  it("shows the accepted event with its tier and deadline right after the 202", async () => {
    const org = await onboard(h);
    const id = await send(org.apiKey, "+14155550100", { notification_type: "OTP" });
    const response = await getEvents(org.apiKey, id);
    expect(response.status).toBe(200);
    const { events } = (await response.json()) as { events: HistoryEntry[] };
    const [accepted] = events;
    expect(accepted).toMatchObject({
      seq: 1,
      type: "accepted",
      retry_count: 0,
      priority: "critical",
      notification_type: "OTP",
      retry_enabled: true,
    });
    expect(new Date(accepted?.occurred_at ?? "").toISOString()).toBe(accepted?.occurred_at);
    // Critical messages live 10 minutes.
    expect(Date.parse(accepted?.expires_at as string) - Date.parse(accepted?.occurred_at ?? "")).toBe(
      600_000,
    );
  });

  it("tells a delivery in order: accepted, attempt started, success with the provider's id", async () => {
    const org = await onboard(h);
    const id = await send(org.apiKey, "+14155550100");
    const events = await finalHistory(org.apiKey, id);
    expect(events.map((e) => [e.seq, e.type, e.kind, e.retry_count])).toEqual([
      [1, "accepted", undefined, 0],
      [2, "pending", "attempt_started", 0],
      [3, "success", undefined, 0],
    ]);
    expect(events[1]).toMatchObject({ attempt: 1 });
    expect(events[2]).toMatchObject({ attempt: 1, provider: "simulator" });
    expect(events[2]?.provider_message_id).toEqual(expect.any(String));
    const times = events.map((e) => Date.parse(e.occurred_at));
    expect(times).toEqual([...times].sort((a, b) => a - b));
  });

  it("explains a retry: the provider's error class, code and message, and when the retry was due", async () => {
    const org = await onboard(h);
    const id = await send(org.apiKey, "+15005550501");
    const events = await finalHistory(org.apiKey, id);
    expect(events.map((e) => [e.type, e.kind, e.retry_count])).toEqual([
      ["accepted", undefined, 0],
      ["pending", "attempt_started", 0],
      ["pending", "retry_scheduled", 1],
      ["pending", "attempt_started", 1],
      ["success", undefined, 1],
    ]);
    const retry = events[2];
    expect(retry).toMatchObject({
      attempt: 1,
      error: { class: "transient", code: "simulated_outage", message: expect.any(String) },
    });
    expect(Date.parse(retry?.retry_at as string)).toBeGreaterThanOrEqual(
      Date.parse(retry?.occurred_at ?? ""),
    );
    expect(events[3]).toMatchObject({ attempt: 2 });
    const record = (await (await getMessage(h, org.apiKey, id)).json()) as { retry_count: number };
    expect(record.retry_count).toBe(events.at(-1)?.retry_count);
  });

  it("gives the reason and the provider's refusal for a rejected recipient", async () => {
    const org = await onboard(h);
    const events = await finalHistory(org.apiKey, await send(org.apiKey, "+15005550001"));
    expect(events.at(-1)).toMatchObject({
      type: "rejected",
      reason: "recipient_refused",
      attempt: 1,
      error: { class: "rejected", code: "invalid_number", message: expect.any(String) },
    });
  });

  it("gives the reason and the last error for a failure", async () => {
    const org = await onboard(h);
    const id = await send(org.apiKey, "+15005550500", { retry_enabled: false });
    const events = await finalHistory(org.apiKey, id);
    expect(events.at(-1)).toMatchObject({
      type: "failed",
      reason: "retries_disabled",
      attempt: 1,
      error: { class: "transient", code: "simulated_outage" },
    });
  });

  it("never shows the message's body or recipient", async () => {
    const org = await onboard(h);
    const id = await send(org.apiKey, "+15005550501");
    await finalHistory(org.apiKey, id);
    const text = await (await getEvents(org.apiKey, id)).text();
    expect(text).not.toContain("Your code");
    expect(text).not.toContain("5005550501");
    expect(text).not.toMatch(/"(body|recipient|to|sender|message_body)"/);
  });

  it("answers 404 for another organization's message, exactly as for an unknown id", async () => {
    const mine = await onboard(h);
    const theirs = await onboard(h);
    const id = await send(theirs.apiKey, "+14155550100");
    const other = await getEvents(mine.apiKey, id);
    const unknown = await getEvents(mine.apiKey, "01900000-0000-7000-8000-000000000000");
    expect([other.status, unknown.status]).toEqual([404, 404]);
    expect(await other.json()).toEqual(await unknown.json());
    expect((await getEvents(theirs.apiKey, id)).status).toBe(200);
  });

  it("answers 400 for an id that is not a UUID", async () => {
    const org = await onboard(h);
    const response = await getEvents(org.apiKey, "12345");
    expect(response.status).toBe(400);
    expect(await response.json()).toEqual({ error: "message_id: message_id must be a UUID" });
  });

  it("authenticates before it looks at the id", async () => {
    const response = await h.app.request("/api/v1/messages/12345/events");
    expect(response.status).toBe(401);
  });

  it("finds an id written in upper case", async () => {
    const org = await onboard(h);
    const id = await send(org.apiKey, "+14155550100");
    expect((await getEvents(org.apiKey, id.toUpperCase())).status).toBe(200);
  });
});
