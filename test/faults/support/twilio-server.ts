import { appendFileSync } from "node:fs";
import { setTimeout as sleep } from "node:timers/promises";
import { FakeTwilio } from "../../support/fake-twilio.js";

/**
 * A Twilio-shaped server in a process of its own (test/support/fake-twilio.ts), so a fault scenario
 * can SIGKILL it mid-request as a provider's outage would cut it. Every request is appended to
 * LOG_FILE as a JSON line the moment it is read, again as its 201 is about to leave (LATENCY_MS
 * later), and once more when the 201 is in the socket's hands; each line names this process: the
 * scenario's ground truth of what reached this provider and what it answered, even for requests
 * the kill cut.
 * Started by test/faults/support/twilio-process.ts.
 */

const env = process.env;
const fake = await FakeTwilio.start(
  env.PUBLIC_BASE_URL ?? "",
  { accountSid: env.ACCOUNT_SID ?? "", authToken: env.AUTH_TOKEN ?? "" },
  Number(env.PORT),
);
const logFile = env.LOG_FILE ?? "";
const log = (line: object) => appendFileSync(logFile, `${JSON.stringify({ pid: process.pid, ...line })}\n`);
fake.onReceived = (request) =>
  log({
    event: "received",
    messageId: request.messageId,
    receivedAt: request.receivedAt,
    answer: request.answer,
  });
const latencyMs = Number(env.LATENCY_MS ?? 0);
const messageIdOf = (sms: { fields: Record<string, string> }) => {
  const callback = sms.fields.StatusCallback ?? "";
  return callback.slice(callback.lastIndexOf("/") + 1);
};
// The 201 is written right after this returns: a request with no `answered` line was cut by a kill.
// A kill can still fall between this line and the write: then `written` (below) never comes.
fake.beforeAnswer = async (sms) => {
  await sleep(latencyMs);
  log({ event: "answered", messageId: messageIdOf(sms) });
};
// Once the 201 is in the socket's hands: a kill after this still lets it reach the service.
fake.afterAnswer = (sms) => log({ event: "written", messageId: messageIdOf(sms) });
console.log(`fake Twilio listening on ${fake.baseUrl}`);
