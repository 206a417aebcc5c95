import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createSmsProvider } from "../../../src/channels/sms/providers/index.js";
import { loadConfig } from "../../../src/runtime/config.js";
import { busiestWindow } from "../../support/busiest-window.js";
import { FakeTwilio } from "../../support/fake-twilio.js";
import { createHarness, eventually, type Harness, onboard } from "../../support/harness.js";

/**
 * A provider account's throughput limit under provider lists (issue 19, docs/decisions/0046 and
 * 0048): SMS_PROVIDER_RATE limits each account, whichever list an attempt came through. One
 * organization sends through `twilio:primary,twilio:backup`, another through `twilio:primary`
 * alone: both lists put the primary first, so the primary's one limit is shared by both (were the
 * list the thing limited, each list would get the rate and the primary twice it).
 */
const PUBLIC_BASE_URL = "https://notify.example.test";
const RATE = 20;
const EACH = 60;
const PRIMARY = { accountSid: "AC33333333333333333333333333333333", authToken: "token-of-the-primary" };
const BACKUP = { accountSid: "AC44444444444444444444444444444444", authToken: "token-of-the-backup" };

let primary: FakeTwilio;
let backup: FakeTwilio;
let h: Harness;
let listed: Awaited<ReturnType<typeof onboard>>;
let primaryOnly: Awaited<ReturnType<typeof onboard>>;

function env(): Record<string, string> {
  return {
    SMS_PROVIDERS: "twilio:primary,twilio:backup",
    ...primary.accountEnv("primary"),
    ...backup.accountEnv("backup"),
    SMS_PROVIDER_RATE: String(RATE),
    PUBLIC_BASE_URL,
  };
}

beforeAll(async () => {
  primary = await FakeTwilio.start(PUBLIC_BASE_URL, PRIMARY);
  backup = await FakeTwilio.start(PUBLIC_BASE_URL, BACKUP);
  h = createHarness(env());
  [listed, primaryOnly] = await Promise.all([onboard(h), onboard(h)]);
  const config = loadConfig({
    NODE_ENV: "test",
    ...env(),
    SMS_PROVIDERS_BY_ORGANIZATION: `${primaryOnly.id}=twilio:primary`,
  });
  const sms = createSmsProvider(config, {});
  for (let i = 0; i < 2; i++) h.startWorker({ providers: { sms } });
});

afterAll(async () => {
  await h?.close();
  await primary?.close();
  await backup?.close();
});

async function sendBatch(apiKey: string, offset: number): Promise<string[]> {
  const items = Array.from({ length: EACH }, (_, i) => ({
    payload: { to: `+1415555${String(2000 + offset + i).padStart(4, "0")}`, body: `note ${i}` },
  }));
  const response = await h.app.request("/api/v1/notifications/sms/batch", {
    method: "POST",
    headers: { "content-type": "application/json", "x-api-key": apiKey },
    body: JSON.stringify(items),
  });
  expect(response.status).toBe(207);
  const { results } = (await response.json()) as { results: Array<{ request_id: string }> };
  return results.map((r) => r.request_id);
}

describe(`SMS_PROVIDER_RATE=${RATE} with two organizations' lists that both start with the primary`, () => {
  it("holds the primary account to its rate over both lists together, every message sent once", async () => {
    const ids = (
      await Promise.all([sendBatch(listed.apiKey, 0), sendBatch(primaryOnly.apiKey, EACH)])
    ).flat();
    await eventually(
      async () => (primary.received.length >= 2 * EACH ? true : undefined),
      30_000,
      "every message at the primary",
    );
    const times = primary.received.map((r) => r.receivedAt);
    // Both organizations' messages went to the primary, each once, none to the backup.
    expect(new Set(primary.received.map((r) => r.messageId))).toEqual(new Set(ids));
    expect(primary.received).toHaveLength(2 * EACH);
    expect(backup.received).toHaveLength(0);
    // One limit of 20 a second over both lists: 2 s' worth in any 2 s (42 with the limiter's
    // tolerance), and room for the jitter of a busy machine between the grant and the request's
    // arrival; a limit per list let through twice that (82 measured).
    const busiest = busiestWindow(times, 2000);
    expect(busiest).toBeLessThanOrEqual(2 * RATE + 12);
    const spanSeconds = (Math.max(...times) - Math.min(...times)) / 1000;
    expect(spanSeconds).toBeGreaterThan((2 * EACH - 2) / RATE - 0.5);
    console.info(
      `primary at ${RATE}/s over two lists: busiest 2 s window ${busiest}, ${2 * EACH} in ${spanSeconds.toFixed(1)} s`,
    );
  }, 60_000);
});
