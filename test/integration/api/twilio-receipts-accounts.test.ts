import { eq } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { messages } from "../../../db/schema.js";
import { createSmsProvider } from "../../../src/channels/sms/providers/index.js";
import { FakeTwilio, type SentSms } from "../../support/fake-twilio.js";
import { createHarness, eventually, type Harness, onboard, sendSms } from "../../support/harness.js";

/**
 * Twilio's status callbacks with several accounts (docs/decisions/0046): a callback is verified with
 * the auth token of the account that took its message, as the message's success names it. Signed
 * by another account of the message's organization's list (one an earlier attempt went to), it is
 * answered 200 and records nothing (`other_account`); signed by no account of that list, even one
 * of ours that another organization sends through, it is a 403, as a forgery is.
 */

const PUBLIC_BASE_URL = "https://notify.example.test";
const PRIMARY = { accountSid: "AC33333333333333333333333333333333", authToken: "primary-account-token-0123" };
const BACKUP = { accountSid: "AC44444444444444444444444444444444", authToken: "backup-account-token-4567" };
/** Another organization's own Twilio account, whose token that organization knows. */
const ACME = { accountSid: "AC55555555555555555555555555555555", authToken: "acme-tenant-own-token-89ab" };

let primary: FakeTwilio;
let backup: FakeTwilio;
let boot: Harness;
let h: Harness;
let org: Awaited<ReturnType<typeof onboard>>;

beforeAll(async () => {
  primary = await FakeTwilio.start(PUBLIC_BASE_URL, PRIMARY);
  backup = await FakeTwilio.start(PUBLIC_BASE_URL, BACKUP);
  const env = {
    SMS_PROVIDERS: "twilio:primary,twilio:backup",
    ...primary.accountEnv("primary"),
    ...backup.accountEnv("backup"),
    // The primary's 503s must not open its breaker here: every message tries it first.
    PROVIDER_BREAKER_FAILURES: "1000",
    PUBLIC_BASE_URL,
  };
  // The organizations first (same database), so that the service's config can name the tenant's list.
  boot = createHarness(env);
  org = await onboard(boot);
  const tenant = await onboard(boot);
  h = createHarness({
    ...env,
    SMS_PROVIDERS_BY_ORGANIZATION: `${tenant.id}=twilio:acme,twilio:backup`,
    TWILIO_ACME_ACCOUNT_SID: ACME.accountSid,
    TWILIO_ACME_AUTH_TOKEN: ACME.authToken,
    TWILIO_ACME_BASE_URL: "http://127.0.0.1:9",
  });
  primary.attach(h.app);
  backup.attach(h.app);
  h.startWorker({ providers: { sms: createSmsProvider(h.config) } });
});
afterAll(async () => {
  await h?.close();
  await boot?.close();
  await primary?.close();
  await backup?.close();
});

let number = 0;
/** Sends an SMS and waits for its success; the request the account that took it got. */
async function sentThrough(fake: FakeTwilio): Promise<{ id: string; sms: SentSms }> {
  const to = `+1415555${String(2000 + number++).padStart(4, "0")}`;
  const response = await sendSms(h, org.apiKey, { payload: { to, body: "Your code is 123456" } });
  expect(response.status).toBe(202);
  const id = ((await response.json()) as { request_id: string }).request_id;
  await eventually(async () => ((await row(id))?.status === "success" ? true : undefined), 15_000, "success");
  const sms = fake.sentTo(to);
  if (!sms) throw new Error("that account got no request");
  return { id, sms };
}

async function row(id: string) {
  const [found] = await h.db.select().from(messages).where(eq(messages.messageId, id));
  return found;
}

async function receipts(id: string) {
  const response = await h.app.request(`/api/v1/messages/${id}/events`, {
    headers: { "x-api-key": org.apiKey },
  });
  const { events } = (await response.json()) as { events: Array<Record<string, unknown>> };
  return events.filter((event) => event.type === "receipt");
}

async function receiptsCounted(outcome: string): Promise<number> {
  const line = (await h.deps.metrics.scrape())
    .split("\n")
    .find((l) => l.startsWith("notification_receipts_total{") && l.includes(`outcome="${outcome}"`));
  return line ? Number(line.split(" ").at(-1)) : 0;
}

describe("given a message the backup account took (the primary answered 503)", () => {
  it("a callback signed with the backup's token is recorded as the backup's; one signed with the primary's is answered 200 and records nothing", async () => {
    await primary.behave("unavailable");
    const { id, sms } = await sentThrough(backup).finally(() => primary.behave("ok"));
    const before = {
      other: await receiptsCounted("other_account"),
      bad: await receiptsCounted("bad_signature"),
    };
    const other = await backup.callback(sms, "delivered", { token: PRIMARY.authToken });
    expect(other.status).toBe(200);
    expect(await receiptsCounted("other_account")).toBe(before.other + 1);
    expect(await receiptsCounted("bad_signature")).toBe(before.bad);
    expect((await row(id))?.deliveryState).toBe("unknown");

    expect((await backup.callback(sms, "delivered")).status).toBe(200);
    expect((await row(id))?.deliveryState).toBe("delivered");
    expect(await receipts(id)).toMatchObject([{ state: "delivered", provider: "twilio:backup" }]);
  });
});

describe("given a message the primary made but did not take (it answered 503 after making it; the backup took the retry)", () => {
  it("the primary's own genuine callback is answered 200 as other_account, never a 403, and records nothing", async () => {
    await primary.behave("made_then_unavailable");
    const to = `+1415555${String(2000 + number++).padStart(4, "0")}`;
    const response = await sendSms(h, org.apiKey, { payload: { to, body: "Your code is 123456" } });
    const id = ((await response.json()) as { request_id: string }).request_id;
    await eventually(
      async () => ((await row(id))?.status === "success" ? true : undefined),
      15_000,
      "success",
    );
    await primary.behave("ok");
    const made = primary.sentTo(to);
    if (!made) throw new Error("the primary made no message");
    const before = {
      other: await receiptsCounted("other_account"),
      bad: await receiptsCounted("bad_signature"),
    };

    const genuine = await primary.callback(made, "delivered");
    expect(genuine.status).toBe(200);
    expect(await receiptsCounted("other_account")).toBe(before.other + 1);
    expect(await receiptsCounted("bad_signature")).toBe(before.bad);
    expect(await receipts(id)).toEqual([]);
  });
});

describe("given a message the primary account took", () => {
  it("a callback signed with the primary's token is recorded; one signed with the backup's records nothing", async () => {
    const { id, sms } = await sentThrough(primary);
    expect((await primary.callback(sms, "sent", { token: BACKUP.authToken })).status).toBe(200);
    expect(await receipts(id)).toEqual([]);
    expect((await primary.callback(sms, "sent")).status).toBe(200);
    expect(await receipts(id)).toMatchObject([{ state: "sent", provider: "twilio:primary" }]);
  });

  it("a callback signed with a token of no account of ours is a 403", async () => {
    const { sms } = await sentThrough(primary);
    const before = await receiptsCounted("bad_signature");
    const forged = await primary.callback(sms, "delivered", { token: "not-any-of-our-tokens" });
    expect(forged.status).toBe(403);
    expect(await forged.json()).toEqual({ error: "X-Twilio-Signature is missing or wrong" });
    expect(await receiptsCounted("bad_signature")).toBe(before + 1);
  });

  it("a callback signed with another organization's own account (in no list of this one's) is a 403", async () => {
    const { id, sms } = await sentThrough(primary);
    expect((await primary.callback(sms, "delivered", { token: ACME.authToken })).status).toBe(403);
    expect(await receipts(id)).toEqual([]);
  });
});

describe("given a callback that comes before the success is recorded", () => {
  it("it is recorded as the account whose token signed it, and the success follows on top", async () => {
    await primary.behave("unavailable");
    let early: Response | undefined;
    backup.beforeAnswer = async (sms) => {
      early = await backup.callback(sms, "sent");
    };
    try {
      const { id } = await sentThrough(backup);
      expect(early?.status).toBe(200);
      expect(await receipts(id)).toMatchObject([{ state: "sent", provider: "twilio:backup" }]);
    } finally {
      backup.beforeAnswer = undefined;
      await primary.behave("ok");
    }
  });

  it("signed with another organization's own account, it is a 403: no receipt and no STOP suppression forged for this organization", async () => {
    let forged: Response | undefined;
    primary.beforeAnswer = async (sms) => {
      forged = await primary.callback(sms, "undelivered", {
        token: ACME.authToken,
        extra: { ErrorCode: "21610" },
      });
    };
    try {
      const { id } = await sentThrough(primary);
      expect(forged?.status).toBe(403);
      expect(await receipts(id)).toEqual([]);
      expect((await row(id))?.deliveryState).toBe("unknown");
      const listed = await h.app.request("/api/v1/suppressions?reason=stop", {
        headers: { "x-api-key": org.apiKey },
      });
      const { suppressions } = (await listed.json()) as { suppressions: Array<{ message_id: string }> };
      expect(suppressions.filter((entry) => entry.message_id === id)).toEqual([]);
    } finally {
      primary.beforeAnswer = undefined;
    }
  });
});
