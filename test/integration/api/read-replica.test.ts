import { v7 as uuidv7 } from "uuid";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { messageStoreFor, readReplicaFor } from "../../../src/api/api-process.js";
import { createApp } from "../../../src/api/app.js";
import type { ReadReplica } from "../../../src/store/read-replica.js";
import { createHarness, onboard } from "../../support/harness.js";
import { createOwnDatabase } from "../../support/own-database.js";

/**
 * DATABASE_READ_URL (issue 18): the API reads records, histories and listings on a replica, and a
 * record or history the replica has not (yet) on the primary, so a GET right after a 202 is never
 * a 404. The "replica" here is a second real database migrated like the primary, filled by hand:
 * a replica as far behind as it can be, or caught up on chosen messages. (Streaming replication
 * itself is Postgres's; what is ours is where each read goes.)
 */

const h = createHarness();
let replica: ReadReplica;
let dropReplica: () => Promise<void> = async () => {};
let unreachable: ReadReplica;

/** The harness's app, reading on `readOn`. */
function appReadingOn(readOn: ReadReplica) {
  return createApp({
    ...h.deps,
    replica: readOn,
    store: messageStoreFor(h.config, h.sql, undefined, readOn),
  });
}

beforeAll(async () => {
  const own = await createOwnDatabase("replica");
  dropReplica = own.drop;
  // Made as the API process makes it.
  const made = readReplicaFor({ ...h.config, DATABASE_READ_URL: own.url });
  if (!made) throw new Error("no replica");
  replica = made;
  // Nothing listens on port 1: the replica is down.
  const down = readReplicaFor({ ...h.config, DATABASE_READ_URL: "postgres://postgres@127.0.0.1:1/none" });
  if (!down) throw new Error("no replica");
  unreachable = down;
});

afterAll(async () => {
  await replica?.sql.end();
  await unreachable?.sql.end();
  await dropReplica();
  await h.close();
});

/** JSON text of a row read as jsonb (this client parses it; its serializer for parameters is off). */
const json = (row: unknown) => (typeof row === "string" ? row : JSON.stringify(row));

/** The replica catches up on one message: its record and events, as the primary has them, with `retry_count` marked. */
async function replicate(messageId: string, retryCount: number) {
  const [record] = await h.sql<
    Array<{ row: unknown }>
  >`select to_jsonb(m) as row from messages m where message_id = ${messageId}`;
  const events = await h.sql<
    Array<{ row: unknown }>
  >`select to_jsonb(e) as row from message_events e where message_id = ${messageId}`;
  await replica.sql`
    insert into messages select * from jsonb_populate_record(null::messages, ${json(record?.row)}::jsonb)`;
  await replica.sql`update messages set retry_count = ${retryCount} where message_id = ${messageId}`;
  for (const { row } of events)
    await replica.sql`
      insert into message_events select * from jsonb_populate_record(null::message_events, ${json(row)}::jsonb)`;
}

async function send(app: ReturnType<typeof createApp>, apiKey: string): Promise<string> {
  const response = await app.request("/api/v1/notifications/sms", {
    method: "POST",
    headers: { "content-type": "application/json", "x-api-key": apiKey },
    body: JSON.stringify({ payload: { to: "+14155550100", body: "read me", sender: "ACME" } }),
  });
  expect(response.status).toBe(202);
  return ((await response.json()) as { request_id: string }).request_id;
}

const get = (app: ReturnType<typeof createApp>, apiKey: string, path: string) =>
  app.request(`/api/v1/messages${path}`, { headers: { "x-api-key": apiKey } });

describe("with a read replica", () => {
  it("answers a GET and a history right after the 202 from the primary while the replica has not the message yet", async () => {
    const app = appReadingOn(replica);
    const org = await onboard(h);
    const id = await send(app, org.apiKey);
    const record = await get(app, org.apiKey, `/${id}`);
    expect(record.status).toBe(200);
    expect(((await record.json()) as { message_id: string }).message_id).toBe(id);
    const history = await get(app, org.apiKey, `/${id}/events`);
    expect(history.status).toBe(200);
    // An unknown id is still a 404, after both.
    expect((await get(app, org.apiKey, `/${uuidv7()}`)).status).toBe(404);
  });

  it("reads the replica once it has the message; a listing shows what the replica has, lagging behind", async () => {
    const app = appReadingOn(replica);
    const org = await onboard(h);
    const first = await send(app, org.apiKey);
    const second = await send(app, org.apiKey);
    const listed = async () => {
      const response = await get(app, org.apiKey, "");
      expect(response.status).toBe(200);
      return ((await response.json()) as { messages: Array<{ message_id: string }> }).messages.map(
        (m) => m.message_id,
      );
    };
    expect(await listed()).toEqual([]);

    await replicate(first, 7);
    const record = await get(app, org.apiKey, `/${first}`);
    expect(((await record.json()) as { retry_count: number }).retry_count).toBe(7); // the replica's copy
    expect(await listed()).toEqual([first]);
    // Another organization's message is not found on the replica either.
    const other = await onboard(h);
    expect((await get(app, other.apiKey, `/${first}`)).status).toBe(404);

    await replicate(second, 0);
    expect(await listed()).toEqual([second, first]);
  });

  it("reads and lists on the primary while the replica cannot answer, without waiting on it", async () => {
    const app = appReadingOn(unreachable);
    const org = await onboard(h);
    const id = await send(app, org.apiKey);
    // Many reads in a row: none waits on the replica's reconnects (postgres.js's backoff grows to
    // 20 s; after a few failures, reads queued behind it would answer 503 at the request deadline).
    for (let read = 0; read < 12; read++) {
      expect((await get(app, org.apiKey, `/${id}`)).status).toBe(200);
      expect((await get(app, org.apiKey, `/${id}/events`)).status).toBe(200);
    }
    const list = await get(app, org.apiKey, "");
    expect(list.status).toBe(200);
    expect(
      ((await list.json()) as { messages: Array<{ message_id: string }> }).messages.map((m) => m.message_id),
    ).toEqual([id]);
  });
});
