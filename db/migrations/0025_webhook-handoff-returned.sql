-- The handoff's deliveries come back with the append (docs/decisions/0036, "The handoff"). An
-- append that hands off (`APPEND_HANDING_OFF`, src/store/events.ts: the only statement that sets
-- `notify.webhook_handoff_lease_ms`) now writes the deliveries of the endpoints of final events
-- only itself, born leased, and returns them: its process no longer reads them back by their keys.
-- The fan-out writes every other delivery, unleased, as 0023 does. In such an append it skips a
-- delivery that is there already (written by the append, whose rows this AFTER trigger sees) by
-- the unique key, not by asking the endpoint's subscriptions again: an endpoint that changed
-- between the append's read and this one would otherwise get its event twice or not at all. The
-- conflict clause finds the row through the unique index whatever plan the function keeps (a
-- subquery's plan made on an empty queue could read it whole). Other statements write exactly as
-- before, without it (its speculative insertion costs a row about 8 µs, 0023).
CREATE OR REPLACE FUNCTION message_events_fan_out_to_webhooks() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF coalesce(current_setting('notify.webhook_handoff_lease_ms', true), '') <> '' THEN
    INSERT INTO webhook_deliveries (endpoint_id, organization_id, message_id, seq, event_type, event_at)
    SELECT w.id, e.organization_id, e.message_id, e.seq, t.event_type, e.occurred_at
    FROM new_events e
    CROSS JOIN LATERAL (SELECT webhook_event_type(e.type, e.data) AS event_type) t
    JOIN webhook_endpoints w
      ON w.organization_id = e.organization_id
     AND w.enabled
     AND (w.event_types IS NULL OR t.event_type = ANY (w.event_types))
    WHERE t.event_type IS NOT NULL
    ORDER BY e.position
    ON CONFLICT (endpoint_id, message_id, seq) DO NOTHING;
  ELSE
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
  END IF;
  RETURN NULL;
END
$$;
