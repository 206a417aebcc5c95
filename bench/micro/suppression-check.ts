/**
 * What the suppression list's check costs the worker's batch load (docs/decisions/0039), in
 * Postgres alone: the delivery store's load statement for batches of 100 messages, with its
 * suppression column and with that column replaced by a null, alternately, against a list of
 * 100,000 entries (and against an empty one). A throw-away database is made and dropped.
 * Usage: `npx tsx bench/micro/suppression-check.ts [entries=100000] [rounds=400] [batch=100]`; env
 * `PLAN_CACHE_MODE` (e.g. `force_generic_plan`) for the connection, `PAST_PARTITIONS=90` for the day
 * partitions of a 90-day retention (a fresh database has the coming week's only).
 */
import { randomBytes, randomUUID } from "node:crypto";
import postgres from "postgres";
import { dropDatabase, ensureDatabase, runMigrations } from "../../db/migrate.js";
import { LOAD_FOR_DELIVERY } from "../../workers/delivery-store.js";

const ENTRIES = Number(process.argv[2] ?? 100_000);
const ROUNDS = Number(process.argv[3] ?? 400);
const ORGANIZATIONS = 100;
const MESSAGES = 20_000;
const BATCH = Number(process.argv[4] ?? 100);

const WITHOUT = LOAD_FOR_DELIVERY.replace(
  /case when e\.seq = 1 and e\.recipient_keys[\s\S]*?end as suppressed/,
  "null::boolean as suppressed",
);
if (WITHOUT === LOAD_FOR_DELIVERY) throw new Error("the load statement's suppression column was not found");

const base = process.env.BENCH_DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/postgres";
const url = new URL(base);
url.pathname = `/ntf_micro_suppressions_${randomUUID().slice(0, 8)}`;
const databaseUrl = url.toString();

const hex = () => randomBytes(16).toString("hex");

async function main(): Promise<void> {
  await ensureDatabase(databaseUrl);
  await runMigrations(databaseUrl);
  // PAST_PARTITIONS=90: the day partitions a database of 90 days' retention holds (a fresh one has
  // the coming week's only), for a plan's cost by partition count.
  const pastDays = Number(process.env.PAST_PARTITIONS ?? 0);
  if (pastDays > 0) {
    const admin = postgres(databaseUrl, { max: 1, onnotice: () => {} });
    await admin`select create_message_partitions((current_date - ${pastDays}::int), current_date)`;
    await admin.end();
  }
  const sql = postgres(databaseUrl, {
    max: 1,
    onnotice: () => {},
    ...(process.env.PLAN_CACHE_MODE && { connection: { plan_cache_mode: process.env.PLAN_CACHE_MODE } }),
  });
  try {
    const organizations = Array.from({ length: ORGANIZATIONS }, () => randomUUID());
    await sql`insert into organizations ${sql(
      organizations.map((id, i) => ({ id, product_id: "micro", name: `Org ${i}`, active: true })),
    )}`;
    // Accepted events as the accept path writes them: clear fields in data, one recipient key.
    const ids: string[] = [];
    for (let start = 0; start < MESSAGES; start += 1000) {
      const rows = Array.from({ length: 1000 }, (_, i) => {
        const id = randomUUID();
        ids.push(id);
        const organizationId = organizations[(start + i) % ORGANIZATIONS] as string;
        return {
          message_id: id,
          seq: 1,
          type: "accepted",
          retry_count: 0,
          data: sql.json({
            id,
            organizationId,
            channel: "sms",
            expiresAt: new Date(Date.now() + 3_600_000).toISOString(),
          }),
          occurred_at: new Date(),
          organization_id: organizationId,
          content_enc: randomBytes(64),
          recipient_keys: [hex()],
        };
      });
      await sql`insert into message_events ${sql(rows)}`;
    }
    await sql`analyze message_events`;

    const measure = async (label: string) => {
      const times = { with: [] as number[], without: [] as number[] };
      for (let round = 0; round < ROUNDS; round++) {
        const start = (round * BATCH) % (MESSAGES - BATCH);
        const batch = ids.slice(start, start + BATCH);
        // Alternate which goes first, so neither always finds the pages the other just read.
        const order: Array<["with" | "without", string]> =
          round % 2 === 0
            ? [
                ["with", LOAD_FOR_DELIVERY],
                ["without", WITHOUT],
              ]
            : [
                ["without", WITHOUT],
                ["with", LOAD_FOR_DELIVERY],
              ];
        for (const [name, text] of order) {
          const t0 = process.hrtime.bigint();
          await sql.unsafe(text, [batch], { prepare: true });
          times[name].push(Number(process.hrtime.bigint() - t0) / 1000);
        }
      }
      const median = (values: number[]) =>
        [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)] ?? 0;
      const w = median(times.with);
      const wo = median(times.without);
      console.log(
        `${label}: batch of ${BATCH}, median ${wo.toFixed(0)} µs without the check, ${w.toFixed(0)} µs with it ` +
          `(+${(w - wo).toFixed(0)} µs, ${((w - wo) / BATCH).toFixed(1)} µs a message)`,
      );
    };

    await measure("empty list");
    await sql`
      insert into suppressions (organization_id, channel, recipient_key, reason)
      select (${organizations}::uuid[])[1 + i % ${ORGANIZATIONS}], (array['sms','email','push'])[1 + (i / ${ORGANIZATIONS}) % 3],
        md5(i::text || random()::text), 'manual'
      from generate_series(0, ${ENTRIES - 1}) as i`;
    await sql`analyze suppressions`;
    await measure(`${ENTRIES.toLocaleString("en")} entries, none matching`);
    const lines = await sql.unsafe(`explain (analyze, costs off) ${LOAD_FOR_DELIVERY}`, [
      ids.slice(0, BATCH),
    ]);
    console.log(
      lines
        .map((row) => String(Object.values(row)[0]))
        .filter((line) => !line.includes("ANY ('{"))
        .join("\n"),
    );
  } finally {
    await sql.end();
    await dropDatabase(databaseUrl);
  }
}

await main();
