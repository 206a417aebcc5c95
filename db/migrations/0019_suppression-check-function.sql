-- The worker's check of the suppression list before an attempt (workers/delivery-store.ts,
-- docs/decisions/0039): a PL/pgSQL function, whose query plan each connection makes once and
-- keeps, rather than a subquery of the load statement, which Postgres plans again at every load
-- (a custom plan for its array of message ids, which also prunes the partitions): measured on a
-- quiet machine, the subquery cost Postgres about 44 µs a message in npm run bench's end to end
-- (bench/results/2026-11-25-suppressions-quiet.md).
CREATE FUNCTION recipient_suppressed(in_organization uuid, in_channel text, in_keys text[]) RETURNS boolean
LANGUAGE plpgsql STABLE PARALLEL SAFE AS $$
BEGIN
  RETURN EXISTS (
    SELECT 1 FROM suppressions s
    WHERE s.organization_id = in_organization AND s.channel = in_channel AND s.recipient_key = ANY (in_keys)
  );
END
$$;
