import { createServer, type Server, type Socket } from "node:net";
import { v7 as uuidv7 } from "uuid";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createDatabase, type Database } from "../../../db/client.js";
import { messageStoreFor } from "../../../src/api/api-process.js";
import { createApp } from "../../../src/api/app.js";
import { ReplicaBreaker } from "../../../src/store/message-store.js";
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
let replica: { db: Database; sql: ReturnType<typeof createDatabase>["sql"] };
let dropReplica: () => Promise<void> = async () => {};
let unreachable: ReturnType<typeof createDatabase>;

/** The harness's app, reading on `readOn`, with the API process's breaker when given. */
function appReadingOn(readOn: { db: Database; sql: typeof replica.sql }, replicaBreaker?: ReplicaBreaker) {
  return createApp({
    ...h.deps,
    readDb: readOn.db,
    replicaBreaker,
    store: messageStoreFor(h.config, h.sql, undefined, readOn.sql, replicaBreaker),
  });
}

beforeAll(async () => {
  const own = await createOwnDatabase("replica");
  dropReplica = own.drop;
  replica = createDatabase({ url: own.url, poolSize: 2 });
  // Nothing listens on port 1: the replica is down.
  unreachable = createDatabase({ url: "postgres://postgres@127.0.0.1:1/none", poolSize: 1 });
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

  it("reads and lists on the primary while the replica cannot answer", async () => {
    const app = appReadingOn(unreachable);
    const org = await onboard(h);
    const id = await send(app, org.apiKey);
    expect((await get(app, org.apiKey, `/${id}`)).status).toBe(200);
    expect((await get(app, org.apiKey, `/${id}/events`)).status).toBe(200);
    const list = await get(app, org.apiKey, "");
    expect(list.status).toBe(200);
    expect(
      ((await list.json()) as { messages: Array<{ message_id: string }> }).messages.map((m) => m.message_id),
    ).toEqual([id]);
  });

  it("skips a replica that does not answer for a while once a read found it so: one connect timeout, not one per read", async () => {
    // A "replica" whose host takes the connection and never answers (as one dropping packets
    // after a firewall change): each connection costs the client its connect timeout.
    const sockets: Socket[] = [];
    const silent: Server = createServer((socket) => sockets.push(socket));
    await new Promise<void>((resolve) => silent.listen(0, "127.0.0.1", resolve));
    const port = (silent.address() as { port: number }).port;
    const mute = createDatabase({
      url: `postgres://postgres@127.0.0.1:${port}/none`,
      poolSize: 1,
      connectTimeoutSeconds: 0.5,
    });
    let clock = 0;
    const breaker = new ReplicaBreaker(10_000, () => clock);
    try {
      const app = appReadingOn(mute, breaker);
      const org = await onboard(h);
      const id = await send(app, org.apiKey);
      expect((await get(app, org.apiKey, `/${id}`)).status).toBe(200); // after one connect timeout
      expect(breaker.open).toBe(true);
      const tried = sockets.length;
      expect(tried).toBeGreaterThanOrEqual(1);
      expect((await get(app, org.apiKey, `/${id}/events`)).status).toBe(200);
      expect((await get(app, org.apiKey, "")).status).toBe(200);
      expect(sockets.length).toBe(tried); // straight to the primary: the replica was not tried
      // Once the break is over, the next read tries the replica again.
      clock = 10_000;
      expect(breaker.open).toBe(false);
      expect((await get(app, org.apiKey, `/${id}`)).status).toBe(200);
      expect(sockets.length).toBeGreaterThan(tried);
    } finally {
      for (const socket of sockets) socket.destroy();
      await mute.sql.end({ timeout: 0 });
      await new Promise<void>((resolve) => silent.close(() => resolve()));
    }
  });
});
