-- The webhook handoff (docs/decisions/0036, "The handoff"). A statement that sets
-- `notify.webhook_handoff_lease_ms` for its transaction (the delivery worker's appends, whose
-- process hands what it appended to its own dispatcher) has its deliveries written already leased
-- to it, where nothing holds them back: the first of the statement's events of a message for that
-- endpoint, with no untried delivery of the same message to it already there (an untried earlier
-- one holds the later ones back, as the claim's order rule says). Such a row is born with
-- `next_attempt_at = leased_until`: a claim never writes that (it leases only due rows, for longer
-- than they have been due), so the writer's dispatcher can tell its own born lease from a claim's.
-- If the handoff never comes (a crash between the commit and the POST), the row is due when the
-- lease ends and any dispatcher claims it. Every other statement writes its rows as 0023 does.
CREATE OR REPLACE FUNCTION message_events_fan_out_to_webhooks() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  handoff_ms integer := nullif(current_setting('notify.webhook_handoff_lease_ms', true), '')::integer;
BEGIN
  IF handoff_ms IS NULL THEN
    INSERT INTO webhook_deliveries (endpoint_id, organization_id, message_id, seq, event_type, event_at)
    SELECT w.id, e.organization_id, e.message_id, e.seq, t.event_type, e.occurred_at
    FROM new_events e
    CROSS JOIN LATERAL (SELECT webhook_event_type(e.type, e.data) AS event_type) t
    JOIN webhook_endpoints w
      ON w.organization_id = e.organization_id
     AND w.enabled
     AND (w.event_types IS NULL OR t.event_type = ANY (w.event_types))
    WHERE t.event_type IS NOT NULL
    ORDER BY e.position;
  ELSE
    -- Planned at each run (EXECUTE): a plan kept for the connection, made while the table was
    -- empty, would read the whole queue (mostly dead rows) to hash it for the NOT EXISTS, where a
    -- probe of the unique index per row is what it needs (the claim is planned at each run for
    -- the same reason: src/store/statement.ts).
    EXECUTE $q$
    INSERT INTO webhook_deliveries (endpoint_id, organization_id, message_id, seq, event_type, event_at,
      next_attempt_at, leased_until)
    SELECT f.endpoint_id, f.organization_id, f.message_id, f.seq, f.event_type, f.occurred_at,
      coalesce(b.until, now()), b.until
    FROM (
      SELECT w.id AS endpoint_id, e.organization_id, e.message_id, e.seq, t.event_type, e.occurred_at,
        e.position, row_number() OVER (PARTITION BY w.id, e.message_id ORDER BY e.seq) AS nth
      FROM new_events e
      CROSS JOIN LATERAL (SELECT webhook_event_type(e.type, e.data) AS event_type) t
      JOIN webhook_endpoints w
        ON w.organization_id = e.organization_id
       AND w.enabled
       AND (w.event_types IS NULL OR t.event_type = ANY (w.event_types))
      WHERE t.event_type IS NOT NULL
    ) f
    LEFT JOIN LATERAL (
      SELECT now() + $1 * interval '1 millisecond' AS until
      WHERE f.nth = 1
        AND NOT EXISTS (
          SELECT 1 FROM webhook_deliveries p
          WHERE p.endpoint_id = f.endpoint_id AND p.message_id = f.message_id AND p.attempts = 0)
    ) b ON true
    ORDER BY f.position
    $q$ USING handoff_ms;
  END IF;
  RETURN NULL;
END
$$;
