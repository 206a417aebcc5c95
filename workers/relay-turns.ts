import type postgres from "postgres";
import { runStatementPlannedEachTime } from "../src/store/statement.js";

/**
 * Fairness between organizations (issue 19, docs/decisions/0047): which outbox rows the relay
 * moves next when the delivery queue may take only `budget` more jobs. Tiers come first (a
 * critical row before any high one, and so on); within a tier the organizations with rows take
 * turns: each gets an equal share of what is left, its oldest rows first, and the rows are
 * interleaved organization by organization. So one organization's backlog of 50,000 waits in
 * Postgres, and another's new message is relayed at the next pass, not after the backlog.
 */

export interface OutboxRow {
  message_id: string;
  priority: number;
  organization_id: string | null;
}

/** Most organizations one pass visits in a tier; the next pass goes on after the last one. */
const MAX_TURNS = 256;

/**
 * The organizations with rows of tier `$2` (of prefix `$1`) after `$3` (null: from the first),
 * at most `$4`, in id order: a loose index scan of `delivery_outbox_turns_idx`, one probe per
 * organization whatever its backlog.
 */
const ORGANIZATIONS_AFTER = `
  with recursive turns(organization_id) as (
    (select organization_id from delivery_outbox
     where queue_prefix = $1 and priority = $2 and organization_id > coalesce($3::uuid, '00000000-0000-0000-0000-000000000000')
       and organization_id is not null
     order by organization_id limit 1)
    union all
    select (select d.organization_id from delivery_outbox d
            where d.queue_prefix = $1 and d.priority = $2 and d.organization_id > t.organization_id
            order by d.organization_id limit 1)
    from turns t where t.organization_id is not null
  )
  select organization_id from turns where organization_id is not null limit $4`;

/**
 * The oldest `$5` rows of each organization of `$3` after its id in `$4` (null: from its first)
 * in tier `$2` of prefix `$1`, locked (`SKIP LOCKED`: relays in other workers take other rows),
 * each with its rank in its organization.
 */
const ROWS_OF = `
  select r.message_id, r.priority, r.organization_id, r.rank
  from unnest($3::uuid[], $4::uuid[]) as o(organization_id, after)
  cross join lateral (
    select d.message_id, d.priority, d.organization_id,
      row_number() over (order by d.message_id) as rank
    from (
      select message_id, priority, organization_id from delivery_outbox
      where queue_prefix = $1 and priority = $2 and organization_id = o.organization_id
        and message_id > coalesce(o.after, '00000000-0000-0000-0000-000000000000')
      order by message_id limit $5
      for update skip locked
    ) d
  ) r`;

/**
 * Rounds of turns in one tier: an organization with fewer rows than its share leaves the rest of
 * the budget to the others, shared again among those that filled theirs.
 */
const MAX_ROUNDS = 3;

/**
 * Which of tiers 1 to `$2` (of prefix `$1`) hold rows of an organization, and which hold rows
 * written before the organization was recorded (no lock): two probes of `delivery_outbox_turns_idx`
 * a tier (the first in its order: without it, Postgres may read a full tier through the table to
 * find an empty one's first row), in one statement, so a pass asks nothing more of empty tiers.
 */
const TIERS_WAITING = `
  select t.priority,
    (select d.organization_id from delivery_outbox d
     where d.queue_prefix = $1 and d.priority = t.priority and d.organization_id is not null
     order by d.organization_id limit 1) is not null as organizations,
    exists (select 1 from delivery_outbox d
            where d.queue_prefix = $1 and d.priority = t.priority and d.organization_id is null) as legacy
  from generate_series(1, $2::integer) as t(priority)
  order by t.priority`;

/** Rows written before the organization was recorded: one turn of their own. */
const ROWS_WITHOUT_ORGANIZATION = `
  select message_id, priority, organization_id from delivery_outbox
  where queue_prefix = $1 and priority = $2 and organization_id is null
  order by message_id limit $3
  for update skip locked`;

/**
 * Where the turns of each tier stopped, so the next pass starts with the organizations after it
 * (only matters with more than {@link MAX_TURNS} organizations waiting in a tier).
 */
export type TurnCursor = Map<number, string | null>;

/**
 * Up to `budget` rows of tiers 1 to `maxPriority`, in turns (above), locked by the transaction
 * `tx`. `cursor` is read and moved on.
 */
export async function takeInTurns(
  tx: postgres.TransactionSql,
  options: { prefix: string; maxPriority: number; budget: number; cursor: TurnCursor },
): Promise<OutboxRow[]> {
  const { prefix, cursor } = options;
  const taken: OutboxRow[] = [];
  const tiers = await runStatementPlannedEachTime<
    Array<{ priority: number; organizations: boolean; legacy: boolean }>
  >(tx, TIERS_WAITING, [prefix, Math.min(options.maxPriority, 4)]);
  for (const { priority: tier, organizations, legacy: legacyWaiting } of tiers) {
    if (taken.length >= options.budget) break;
    if (!organizations && !legacyWaiting) continue;
    const left = options.budget - taken.length;
    const window = Math.min(MAX_TURNS, left);
    const after = cursor.get(tier) ?? null;
    let turns = organizations ? await organizationsAfter(tx, prefix, tier, after, window) : [];
    if (organizations && turns.length < window && after !== null) {
      // Round again from the first organization, up to where this round began.
      const wrapped = await organizationsAfter(tx, prefix, tier, null, window - turns.length);
      turns = [...turns, ...wrapped.filter((id) => id <= after && !turns.includes(id))];
    }
    const groups = turns.length + (legacyWaiting ? 1 : 0);
    if (groups === 0) continue;
    // Round 1 shares the budget among every organization (and the rows without one, first: they
    // are few and finite, a release's leftovers); later rounds share what is left among the
    // organizations that took a full share.
    let share = Math.ceil(left / groups);
    const picked: Array<{ row: OutboxRow; rank: number; turn: number }> = [];
    if (legacyWaiting) {
      const legacy = await runStatementPlannedEachTime<OutboxRow[]>(tx, ROWS_WITHOUT_ORGANIZATION, [
        prefix,
        tier,
        share,
      ]);
      for (const [i, row] of legacy.entries()) picked.push({ row, rank: i + 1, turn: -1 });
    }
    let open = turns.map((id, turn) => ({ id, turn, after: null as string | null, taken: 0, thisRound: 0 }));
    for (let round = 0; round < MAX_ROUNDS && open.length > 0 && picked.length < left; round++) {
      if (round > 0) share = Math.ceil((left - picked.length) / open.length);
      const rows = await runStatementPlannedEachTime<Array<OutboxRow & { rank: string }>>(tx, ROWS_OF, [
        prefix,
        tier,
        open.map((o) => o.id),
        open.map((o) => o.after),
        share,
      ]);
      const byOrganization = new Map(open.map((o) => [o.id, o]));
      for (const turn of open) turn.thisRound = 0;
      for (const { rank, ...row } of rows) {
        const turn = byOrganization.get(row.organization_id ?? "");
        if (!turn) continue;
        picked.push({ row, rank: turn.taken + Number(rank), turn: turn.turn });
        turn.after = row.message_id;
        turn.thisRound++;
      }
      for (const turn of open) turn.taken += turn.thisRound;
      // Only an organization that filled its share may have more.
      open = open.filter((turn) => turn.thisRound === share);
    }
    // Interleaved: every organization's first row in turn order, then every one's second, and so
    // on; what the budget cuts off is the last turns' last rows.
    picked.sort((a, b) => a.rank - b.rank || a.turn - b.turn);
    const kept = picked.slice(0, left);
    taken.push(...kept.map(({ row }) => row));
    // The next pass starts after the last organization served: one whose turn the budget cut off
    // goes first then. With every organization of the tier seen and served, it starts afresh.
    const served = kept.reduce((last, { turn }) => Math.max(last, turn), -1);
    const cut = served < turns.length - 1;
    cursor.set(tier, cut || turns.length === window ? (turns[served] ?? null) : null);
  }
  return taken;
}

async function organizationsAfter(
  tx: postgres.TransactionSql,
  prefix: string,
  tier: number,
  after: string | null,
  limit: number,
): Promise<string[]> {
  if (limit <= 0) return [];
  const rows = await runStatementPlannedEachTime<Array<{ organization_id: string }>>(
    tx,
    ORGANIZATIONS_AFTER,
    [prefix, tier, after, limit],
  );
  return rows.map((row) => row.organization_id);
}
