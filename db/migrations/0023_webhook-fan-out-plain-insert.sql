-- The webhook fan-out (0012) inserts its deliveries with a plain INSERT: no ON CONFLICT, whose
-- speculative insertion (a probe of the unique index before each row, and a record more in the
-- WAL after it) cost about 8 µs a delivery, a fifth of the row's insert (docs/decisions/0036,
-- "Found later", 2026-11-28). No row it writes can already be there: the trigger sees only the
-- events its own statement inserted, each (message_id, seq) once (message_events' primary key)
-- and each endpoint once, and the only other writer of deliveries, a recovery, reads events
-- already committed, which an event of this statement's transaction is not. A row that were
-- there anyway would fail the append (23505) rather than be skipped in silence.
CREATE OR REPLACE FUNCTION message_events_fan_out_to_webhooks() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
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
  RETURN NULL;
END
$$;
