-- The webhook handoff (docs/decisions/0036, "The handoff"). A statement that sets
-- `notify.webhook_handoff_lease_ms` for its transaction (the delivery worker's appends, whose
-- process hands what it appended to its own dispatcher) has a delivery written already leased to
-- it for that long when its endpoint takes final events only (`message.succeeded`,
-- `message.failed`, `message.rejected`, some of them): a message has one final event, so such an
-- endpoint never has an earlier delivery of the same message that the claim's order rule would
-- hold this one behind, and it may go at once. Such a row is born due (`next_attempt_at = now()`,
-- as every row) and leased for exactly that long after it: a claim never leaves that pair (it
-- leases only rows due before its own start, which is after their writer's), so the writer's
-- dispatcher tells its own born lease from a claim's. Giving one back clears the lease alone (an
-- unindexed column: a HOT update, nothing written to the due index).
-- If the handoff never comes (a crash between the commit and the POST), the row is due when the
-- lease ends and any dispatcher claims it. Every other row, and every row of any other statement,
-- is written as 0023 writes it (unleased).
CREATE OR REPLACE FUNCTION message_events_fan_out_to_webhooks() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  handoff_until timestamptz := now()
    + nullif(current_setting('notify.webhook_handoff_lease_ms', true), '')::integer * interval '1 millisecond';
BEGIN
  INSERT INTO webhook_deliveries (endpoint_id, organization_id, message_id, seq, event_type, event_at,
    leased_until)
  SELECT w.id, e.organization_id, e.message_id, e.seq, t.event_type, e.occurred_at, b.until
  FROM new_events e
  CROSS JOIN LATERAL (SELECT webhook_event_type(e.type, e.data) AS event_type) t
  JOIN webhook_endpoints w
    ON w.organization_id = e.organization_id
   AND w.enabled
   AND (w.event_types IS NULL OR t.event_type = ANY (w.event_types))
  CROSS JOIN LATERAL (
    SELECT CASE WHEN w.event_types <@ ARRAY['message.succeeded', 'message.failed', 'message.rejected']
      THEN handoff_until END AS until) b
  WHERE t.event_type IS NOT NULL
  ORDER BY e.position;
  RETURN NULL;
END
$$;
