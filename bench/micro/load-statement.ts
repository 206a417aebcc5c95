/**
 * What the worker's load statement costs Postgres by where it reads (workers/delivery-store.ts):
 * on the parent `message_events` (planned at every execution, its id array pruning the day
 * partitions), or on the ids' day partition by name, planned as Postgres chooses (for these
 * repeated loads of one size, at every execution: a custom plan), or once (`plan_cache_mode =
 * force_generic_plan`, as Postgres may choose to); each with the suppression check, without it (the
 * column replaced by a null), and on the partition with the check's earlier form (every recipient
 * as `= any(recipient_keys)`), against 100,000 suppression entries spread as the benchmark's are
 * (100 organizations, three channels: 333 a list). Wall time of each prepared statement, the
 * variants taken in turn round after round, medians. A throw-away database is made and dropped.
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
const ORGANIZATIONS = 100;

/** The load statement's suppression column. */
const CHECK_COLUMN = /case when e\.seq = 1 and e\.recipient_keys[\s\S]*?end as suppressed/;
const WITHOUT_CHECK = LOAD_FOR_DELIVERY.replace(CHECK_COLUMN, "null::boolean as suppressed");
if (WITHOUT_CHECK === LOAD_FOR_DELIVERY)
  throw new Error("the load statement's suppression column was not found");
/** The check as it was before 2026-11-28 (afternoon): every recipient through `= any(…)`. */
const CHECK_AS_ANY = LOAD_FOR_DELIVERY.replace(
  CHECK_COLUMN,
  `case when e.seq = 1 and e.recipient_keys is not null then exists (
      select from suppressions s
      where s.organization_id = e.organization_id and s.channel = e.data->>'channel'
        and s.recipient_key = any(e.recipient_keys))
    end as suppressed`,
);
const today = eventsPartitionOf(uuidv7()) as string;
const onPartition = (text: string) => text.replace("from message_events e", `from ${today} e`);

const url = new URL(process.env.BENCH_DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/postgres");
url.pathname = `/ntf_micro_load_${randomUUID().slice(0, 8)}`;
const databaseUrl = url.toString();

await ensureDatabase(databaseUrl);
await runMigrations(databaseUrl);
const sql = postgres(databaseUrl, { max: 1, onnotice: () => {} });
const planOnce = postgres(databaseUrl, {
  max: 1,
  onnotice: () => {},
  connection: { plan_cache_mode: "force_generic_plan" },
});
try {
  const pastDays = Number(process.env.PAST_PARTITIONS ?? 0);
  if (pastDays > 0)
    await sql`select create_message_partitions((current_date - ${pastDays}::int), current_date)`;
  const organizations = Array.from({ length: ORGANIZATIONS }, () => randomUUID());
  await sql`insert into organizations ${sql(
    organizations.map((id) => ({ id, product_id: "micro", name: id, active: true })),
  )}`;
  const ids = Array.from({ length: MESSAGES }, () => uuidv7());
  await sql`insert into message_events ${sql(
    ids.map((id, i) => ({
      message_id: id,
      seq: 1,
      type: "accepted",
      retry_count: 0,
      data: sql.json({
        id,
        organizationId: organizations[i % ORGANIZATIONS],
        channel: "sms",
        priority: "normal",
        notificationType: "otp",
        retryEnabled: true,
        sender: "ACME",
        expiresAt: new Date().toISOString(),
      }),
      occurred_at: new Date(),
      organization_id: organizations[i % ORGANIZATIONS],
      content_enc: randomBytes(64),
      recipient_keys: [randomBytes(16).toString("hex")],
    })),
  )}`;
  await sql`insert into suppressions (organization_id, channel, recipient_key, reason)
    select (${organizations}::uuid[])[1 + i % ${ORGANIZATIONS}],
      (array['sms','email','push'])[1 + (i / ${ORGANIZATIONS}) % 3], md5(i::text), 'manual'
    from generate_series(0, ${ENTRIES - 1}) as i`;
  // Vacuumed as autovacuum would have: with the visibility map set, reading the list by index
  // alone looks cheap, which is what made the earlier form of the check read a whole list.
  await sql`vacuum analyze`;

  const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)] ?? 0;
  for (const size of [1, 5, 30]) {
    const variants: Record<string, string> = {
      "parent, check": LOAD_FOR_DELIVERY,
      "parent, no check": WITHOUT_CHECK,
      "partition, check": onPartition(LOAD_FOR_DELIVERY),
      "partition, check as = any": onPartition(CHECK_AS_ANY),
      "partition, no check": onPartition(WITHOUT_CHECK),
      "partition planned once, check": onPartition(LOAD_FOR_DELIVERY),
      "partition planned once, no check": onPartition(WITHOUT_CHECK),
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
        await (name.includes("planned once") ? planOnce : sql).unsafe(text, [batch], { prepare: true });
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
  await Promise.all([sql.end(), planOnce.end()]);
  await dropDatabase(databaseUrl);
}
