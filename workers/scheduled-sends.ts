import type postgres from "postgres";
import type { Logger } from "../src/runtime/logger.js";
import { runStatementPlannedEachTime } from "../src/store/statement.js";
import { every } from "./periodic.js";

/**
 * Scheduled sends (docs/decisions/0044): a message accepted with a `send_at` still ahead waits in
 * `scheduled_deliveries`, in Postgres, not as a delayed job in Redis. This moves the rows that are
 * due into the delivery outbox, from where the relay adds their jobs like any other message's.
 */

// Both planned at each call: the table holds what is scheduled for later, from none to millions
// (src/store/statement.ts; test/integration/workers/queue-table-plans.test.ts).

/** Whether a row of prefix `$1` is due at `$2`. */
const ANY_DUE = `select 1 from scheduled_deliveries where queue_prefix = $1 and due_at <= $2::timestamptz limit 1`;

/** The `$3` earliest rows of prefix `$1` due at `$2`, moved to the outbox. */
const MOVE_DUE = `
  with due as (
    delete from scheduled_deliveries where message_id in (
      select message_id from scheduled_deliveries
      where queue_prefix = $1 and due_at <= $2::timestamptz
      order by due_at
      limit $3
      for update skip locked)
    returning message_id, queue_prefix, priority, organization_id
  )
  insert into delivery_outbox (message_id, queue_prefix, priority, organization_id)
  select message_id, queue_prefix, priority, organization_id from due
  on conflict (message_id) do nothing`;

/**
 * Moves up to `batchSize` rows of this queue prefix whose `due_at` has come into
 * `delivery_outbox`, earliest first, in one statement: the delete and the insert commit together,
 * so a message is in one of the two tables (or its job in Redis), never in none and never twice.
 * Workers share the work (`SKIP LOCKED`). Returns how many it moved.
 */
export async function releaseDueSends(
  sql: postgres.Sql,
  options: { queuePrefix: string; now: Date; batchSize: number },
): Promise<number> {
  const { queuePrefix } = options;
  // As text: the shared client's own date serialisation is off (db/client.ts).
  const now = options.now.toISOString();
  // A cheap look first: with nothing due, one indexed read per poll and no write.
  const [due] = await runStatementPlannedEachTime(sql, ANY_DUE, [queuePrefix, now]);
  if (!due) return 0;
  const moved = await runStatementPlannedEachTime<postgres.RowList<postgres.Row[]>>(sql, MOVE_DUE, [
    queuePrefix,
    now,
    options.batchSize,
  ]);
  return moved.count;
}

/** How often due scheduled sends are looked for: the lateness of a scheduled send's first attempt. */
const POLL_MS = 200;
/** Rows moved per statement: a full batch means more may be due, looked for at once. */
const BATCH_SIZE = 500;

/**
 * Runs {@link releaseDueSends} every {@link POLL_MS} while `when()` holds (the database is
 * reachable), going again at once while it moves full batches. Failures are logged and tried
 * again on the next poll.
 */
export function startScheduledSends(deps: {
  sql: postgres.Sql;
  queuePrefix: string;
  logger: Pick<Logger, "warn">;
  when?: () => boolean;
}): { stop: () => Promise<void> } {
  return every(POLL_MS, deps.when ?? (() => true), async () => {
    try {
      for (;;) {
        const moved = await releaseDueSends(deps.sql, {
          queuePrefix: deps.queuePrefix,
          now: new Date(),
          batchSize: BATCH_SIZE,
        });
        if (moved < BATCH_SIZE) return;
      }
    } catch (error) {
      deps.logger.warn({ err: error }, "moving due scheduled sends failed (tried again on the next poll)");
    }
  });
}
