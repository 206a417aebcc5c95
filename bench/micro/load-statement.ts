/**
 * What the worker's load statement costs Postgres by where it reads (workers/delivery-store.ts):
 * on the parent `message_events` (planned at every execution, its id array pruning the day
 * partitions) or on the ids' day partition by name (nothing to prune), each
 * with the suppression check and without it (the column replaced by a null), against 100,000
 * suppression entries. Wall time of each prepared statement through one connection, the variants
 * taken in turn round after round, medians. A throw-away database is made and dropped.
 * Usage: `npx tsx bench/micro/load-statement.ts [rounds=600]`; env `PAST_PARTITIONS=90` for the day
 * partitions of a 90-day retention (a fresh database has the coming week's only).
 */
import { randomBytes, randomUUID } from "node:crypto";
import postgres from "postgres";
import { v7 as uuidv7 } from "uuid";
import { dropDatabase, ensureDatabase, runMigrations } from "../../db/migrate.js";
import { LOAD_FOR_DELIVERY } from "../../workers/delivery-store.js";
import { eventsPartitionOf } from "../../workers/message-partitions.js";

const ROUNDS = Number(process.argv[2] ?? 600);
const MESSAGES = 2000;
const ENTRIES = 100_000;

const WITHOUT_CHECK = LOAD_FOR_DELIVERY.replace(
  /case when e\.seq = 1 and e\.recipient_keys[\s\S]*?end as suppressed/,
  "null::boolean as suppressed",
);
if (WITHOUT_CHECK === LOAD_FOR_DELIVERY)
  throw new Error("the load statement's suppression column was not found");
const today = eventsPartitionOf(uuidv7()) as string;
const onPartition = (text: string) => text.replace("from message_events e", `from ${today} e`);

const url = new URL(process.env.BENCH_DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/postgres");
url.pathname = `/ntf_micro_load_${randomUUID().slice(0, 8)}`;
const databaseUrl = url.toString();

await ensureDatabase(databaseUrl);
await runMigrations(databaseUrl);
const sql = postgres(databaseUrl, { max: 1, onnotice: () => {} });
try {
  const pastDays = Number(process.env.PAST_PARTITIONS ?? 0);
  if (pastDays > 0)
    await sql`select create_message_partitions((current_date - ${pastDays}::int), current_date)`;
  const organizationId = randomUUID();
  await sql`insert into organizations (id, product_id, name, active) values (${organizationId}, 'micro', 'Micro', true)`;
  const ids = Array.from({ length: MESSAGES }, () => uuidv7());
  await sql`insert into message_events ${sql(
    ids.map((id) => ({
      message_id: id,
      seq: 1,
      type: "accepted",
      retry_count: 0,
      data: sql.json({ id, organizationId, channel: "sms", expiresAt: new Date().toISOString() }),
      occurred_at: new Date(),
      organization_id: organizationId,
      content_enc: randomBytes(64),
      recipient_keys: [randomBytes(16).toString("hex")],
    })),
  )}`;
  await sql`insert into suppressions (organization_id, channel, recipient_key, reason)
    select ${organizationId}, 'sms', md5(i::text), 'manual' from generate_series(1, ${ENTRIES}) as i`;
  await sql`analyze`;

  const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)] ?? 0;
  for (const size of [1, 5]) {
    const variants: Record<string, string> = {
      "parent, check": LOAD_FOR_DELIVERY,
      "parent, no check": WITHOUT_CHECK,
      "partition, check": onPartition(LOAD_FOR_DELIVERY),
      "partition, no check": onPartition(WITHOUT_CHECK),
    };
    const times: Record<string, number[]> = Object.fromEntries(
      Object.keys(variants).map((name) => [name, []]),
    );
    for (let round = 0; round < ROUNDS; round++) {
      const batch = ids.slice(
        (round * size) % (MESSAGES - size),
        ((round * size) % (MESSAGES - size)) + size,
      );
      for (const [name, text] of Object.entries(variants)) {
        const t0 = process.hrtime.bigint();
        await sql.unsafe(text, [batch], { prepare: true });
        times[name]?.push(Number(process.hrtime.bigint() - t0) / 1000);
      }
    }
    console.log(
      `${size} message(s) a load, ${pastDays} past partitions: ` +
        Object.keys(variants)
          .map((name) => `${name} ${median(times[name] ?? []).toFixed(0)} µs`)
          .join(", "),
    );
  }
} finally {
  await sql.end();
  await dropDatabase(databaseUrl);
}
