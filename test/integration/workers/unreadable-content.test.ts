import { randomUUID } from "node:crypto";
import { afterAll, describe, expect, it } from "vitest";
import type { MessageContent } from "../../../src/domain/events.js";
import { initialState } from "../../../src/domain/state.js";
import type { Logger } from "../../../src/runtime/logger.js";
import { isContentErased, storedContent } from "../../../src/store/content.js";
import { enqueueDelivery } from "../../../src/store/delivery-queue.js";
import { appendEvents } from "../../../src/store/events.js";
import { createDeliveryStore, type DeliveryLoad } from "../../../workers/delivery-store.js";
import { createHarness, eventually, getMessage, onboard, sendSms } from "../../support/harness.js";

/**
 * A content that does not open (altered, or moved from another message's row) is that message's
 * problem alone: the worker's grouped load still loads the others of its batch, and the message
 * is rejected as one whose content is gone (docs/decisions/0034), with a warning naming it.
 */
const h = createHarness();
afterAll(() => h.close());

describe("a message whose sealed content does not open", () => {
  it("fails neither its batch nor the others: it is rejected content_erased, with a warning naming it", async () => {
    const org = await onboard(h);
    const ids: string[] = [];
    for (const to of ["+14155550131", "+14155550132"]) {
      const response = await sendSms(h, org.apiKey, { payload: { to, body: "hello", sender: "ACME" } });
      ids.push(((await response.json()) as { request_id: string }).request_id);
    }
    // Another message carrying the first one's sealed content: it does not open under its own id.
    const [row] = await h.sql<
      Array<{ data: Record<string, unknown>; content_enc: Buffer; recipient_keys: string[] }>
    >`
      select data, content_enc, recipient_keys from message_events where message_id = ${ids[0] ?? ""} and seq = 1`;
    if (!row) throw new Error("no accepted event");
    const badId = randomUUID();
    const moved: MessageContent = storedContent(
      { ...row.data, id: badId },
      row.content_enc,
      row.recipient_keys,
    );
    await appendEvents(h.sql, initialState, [
      { type: "accepted", retryCount: 0, occurredAt: new Date().toISOString(), data: moved },
    ]);

    const warnings: Array<{ fields: unknown; message: string }> = [];
    const logger = {
      warn: (fields: unknown, message: string) => void warnings.push({ fields, message }),
    } as unknown as Pick<Logger, "warn">;
    const store = createDeliveryStore(h.sql, h.deps.store.content, logger);
    // Loaded together, as the worker's concurrent jobs load them: one statement for the three.
    const [first, bad, second] = await Promise.all([ids[0], badId, ids[1]].map((id) => store.load(id ?? "")));
    const messageOf = (load: DeliveryLoad | undefined) =>
      load?.state.status === "accepted" ? load.state.message : undefined;
    expect(messageOf(first)?.recipient).toBe("+14155550131");
    expect(messageOf(second)?.recipient).toBe("+14155550132");
    expect(bad?.state.status).toBe("accepted");
    expect(isContentErased(messageOf(bad) as MessageContent)).toBe(true);
    expect(warnings).toEqual([
      { fields: { messageId: badId }, message: expect.stringMatching(/does not open/) },
    ]);

    await enqueueDelivery(h.queue, { messageId: badId, priority: "medium" });
    h.startWorker();
    const all = [...ids, badId];
    const outcomes = await eventually(async () => {
      const rows = await h.sql<Array<{ message_id: string; status: string }>>`
        select message_id, status from messages where message_id = any(${all}::uuid[])`;
      const statuses = all.map((id) => rows.find((row) => row.message_id === id)?.status);
      return statuses.every((status) => status === "success" || status === "rejected") ? statuses : undefined;
    });
    expect(outcomes).toEqual(["success", "success", "rejected"]);
    const [last] = await h.sql<Array<{ data: { reason: string } }>>`
      select data from message_events where message_id = ${badId} order by seq desc limit 1`;
    expect(last?.data.reason).toBe("content_erased");
  });

  it("fails no other read: the records read together answer, the one that does not open shows no content", async () => {
    const org = await onboard(h);
    const ids: string[] = [];
    for (const to of ["+14155550133", "+14155550134"]) {
      const response = await sendSms(h, org.apiKey, { payload: { to, body: "hello", sender: "ACME" } });
      ids.push(((await response.json()) as { request_id: string }).request_id);
    }
    const [good = "", bad = ""] = ids;
    // The second record now carries the first one's sealed content: it does not open under its id.
    await h.sql`
      update messages set content_enc = (select content_enc from messages where message_id = ${good})
      where message_id = ${bad}`;
    // Read together, as concurrent requests are: one statement for both.
    const [first, second] = await Promise.all([
      getMessage(h, org.apiKey, good),
      getMessage(h, org.apiKey, bad),
    ]);
    expect(first.status).toBe(200);
    expect(second.status).toBe(200);
    expect(((await first.json()) as { receiver_id: string | null }).receiver_id).toBe("+14155550133");
    expect(((await second.json()) as { receiver_id: string | null }).receiver_id).toBeNull();
  });
});
