import { appendFileSync } from "node:fs";
import { setTimeout as sleep } from "node:timers/promises";
import { FakeTwilio } from "../../support/fake-twilio.js";

/**
 * A Twilio-shaped server in a process of its own (test/support/fake-twilio.ts), so a fault scenario
 * can SIGKILL it mid-request as a provider's outage would cut it. Every request is appended to
 * LOG_FILE as a JSON line the moment it is read, and again as its 201 leaves (LATENCY_MS later):
 * the scenario's ground truth of what reached this provider and what it answered, even for
 * requests the kill cut.
 * Started by test/faults/support/twilio-process.ts.
 */

const env = process.env;
const fake = await FakeTwilio.start(
  env.PUBLIC_BASE_URL ?? "",
  { accountSid: env.ACCOUNT_SID ?? "", authToken: env.AUTH_TOKEN ?? "" },
  Number(env.PORT),
);
const logFile = env.LOG_FILE ?? "";
const log = (line: object) => appendFileSync(logFile, `${JSON.stringify(line)}\n`);
fake.onReceived = (request) =>
  log({
    event: "received",
    messageId: request.messageId,
    receivedAt: request.receivedAt,
    answer: request.answer,
  });
const latencyMs = Number(env.LATENCY_MS ?? 0);
// The 201 is written right after this returns: a request with no `answered` line was cut by a kill.
// (A kill can still land between this line and the write: the line's time tells how close it was.)
fake.beforeAnswer = async (sms) => {
  await sleep(latencyMs);
  const callback = sms.fields.StatusCallback ?? "";
  log({
    event: "answered",
    messageId: callback.slice(callback.lastIndexOf("/") + 1),
    answeredAt: Date.now(),
  });
};
console.log(`fake Twilio listening on ${fake.baseUrl}`);
