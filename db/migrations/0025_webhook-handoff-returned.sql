-- The handoff's deliveries come back with the append (docs/decisions/0036, "The handoff"). The
-- delivery worker's append (`APPEND_HANDING_OFF`, src/store/events.ts) now writes every webhook
-- delivery of its events itself, in the same statement: those of the endpoints of final events
-- only born leased to its process, the others unleased, exactly as below; it returns the born
-- ones, so the process no longer reads them back by their keys. It says so by setting
-- `notify.webhook_fan_out_written` for its transaction, and the fan-out then leaves its events
-- alone, clearing the setting as it does: it holds for that one statement even inside an explicit
-- transaction (the worker runs its appends outside one). Every other statement is fanned out as
-- 0023 does. A worker of an earlier release sets
-- `notify.webhook_handoff_lease_ms` instead (0024), which this function no longer reads: its
-- deliveries are written unleased and claimed (its read of born rows finds none), none lost
-- while releases mix.
CREATE OR REPLACE FUNCTION message_events_fan_out_to_webhooks() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF current_setting('notify.webhook_fan_out_written', true) = 'on' THEN
    PERFORM set_config('notify.webhook_fan_out_written', '', true);
    RETURN NULL;
  END IF;
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
