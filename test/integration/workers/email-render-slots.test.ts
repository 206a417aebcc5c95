import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { renderSandbox } from "../../../src/channels/email/templates/sandbox.js";
import {
  createHarness,
  eventually,
  getMessage,
  onboard,
  sendNotification,
  storeTemplateDirectly,
} from "../../support/harness.js";
import { eventsOf } from "./history.js";

/**
 * Decision 0029: an e-mail waiting for a render must not hold a delivery slot that SMS needs.
 * The worker here has two slots and lets renders hold at most one (as a worker process with
 * WORKER_CONCURRENCY=2 does: half of them); e-mails beyond are handed back, uncounted.
 */
const h = createHarness();
const DEADLINE_MS = 3000;
let noisy: Awaited<ReturnType<typeof onboard>>;
let quiet: Awaited<ReturnType<typeof onboard>>;

beforeAll(async () => {
  renderSandbox.configure({ deadlineMs: DEADLINE_MS, maxUnderWay: 1 });
  [noisy, quiet] = await Promise.all([onboard(h), onboard(h)]);
  // Four nested loops over 200 items (1.6·10⁹ iterations, printing nothing): every render takes
  // the whole deadline.
  await storeTemplateDirectly(h, noisy.id, {
    name: "slow",
    code: `${"{{#each @root.x}}".repeat(4)}${"{{/each}}".repeat(4)}`,
  });
  h.startWorker({ concurrency: 2 });
  // Warm: the pool's threads started, and the SMS path run once, so neither start-up is measured.
  await renderSandbox.renderSample({ code: "<p>warm</p>", text: null }, "warm");
  await finalOf(quiet.apiKey, await sendOtp());
});

async function sendOtp(): Promise<string> {
  const sms = await sendNotification(h, "sms", quiet.apiKey, {
    payload: { to: "+14155550100", body: "Your code is 123456" },
    notification_type: "OTP",
  });
  return ((await sms.json()) as { request_id: string }).request_id;
}
afterAll(async () => {
  await h.close();
  await renderSandbox.close();
});

/**
 * The message's final record, and when this poll saw it final (all messages are polled at once;
 * an e-mail's `rejected` event carries the time its attempt began, before the render).
 */
async function finalOf(apiKey: string, id: string) {
  return eventually(async () => {
    const found = (await (await getMessage(h, apiKey, id)).json()) as { status: string; retry_count: number };
    return ["success", "failed", "rejected"].includes(found.status)
      ? { ...found, at: Date.now() }
      : undefined;
  }, 30_000);
}

describe("e-mails waiting for renders do not hold the slots SMS need", () => {
  it("another organization's OTP SMS is delivered before the first slow e-mail is rendered; the e-mails handed back count no attempt", async () => {
    const rendersBefore = renderSandbox.stats.renders;
    const emails = await Promise.all(
      [1, 2, 3].map(async () => {
        const response = await sendNotification(h, "email", noisy.apiKey, {
          payload: {
            template_name: "slow",
            message: {
              from_email: "hello@acme.test",
              subject: "Digest",
              to: [{ email: "ada@example.com" }],
              merge_language: "handlebars",
              global_merge_vars: [{ name: "x", content: Array.from({ length: 200 }, (_, i) => i) }],
            },
          },
        });
        expect(response.status).toBe(202);
        return ((await response.json()) as { request_id: string }).request_id;
      }),
    );
    // The first e-mail's render has begun (the warm-up was one render).
    await eventually(async () => (renderSandbox.stats.renders > rendersBefore ? true : undefined));
    const smsId = await sendOtp();
    const [smsFinal, ...emailFinals] = await Promise.all([
      finalOf(quiet.apiKey, smsId),
      ...emails.map((id) => finalOf(noisy.apiKey, id)),
    ]);

    expect(smsFinal.status).toBe("success");
    expect(Math.min(...emailFinals.map((e) => e.at))).toBeGreaterThan(smsFinal.at);
    for (const [index, email] of emailFinals.entries()) {
      expect(email).toMatchObject({ status: "rejected", retry_count: 0 });
      const events = await eventsOf(h.db, emails[index] ?? "");
      expect(events.map((e) => e.type)).toEqual(["accepted", "rejected"]);
    }
    expect(renderSandbox.stats.refused).toBeGreaterThan(0); // some were handed back, more than once
  });
});
