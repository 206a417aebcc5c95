-- Status webhooks' fan-out (docs/decisions/0036): every statement that appends message events
-- also writes one webhook delivery per (event, enabled endpoint of the event's organization
-- subscribed to its type), in the same transaction. A committed event is therefore never lost on
-- its way to a subscriber, whichever code path appended it, and an aborted one is never sent.
-- The mapping of event types is src/domain/webhooks.ts's webhookEventTypeOf: change both.
-- webhook_event_type(type, data): the webhook event type of a message event, null for one not sent.
CREATE FUNCTION webhook_event_type(event_type text, data jsonb) RETURNS text LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT CASE event_type
    WHEN 'accepted' THEN 'message.accepted'
    WHEN 'success' THEN 'message.succeeded'
    WHEN 'failed' THEN 'message.failed'
    WHEN 'rejected' THEN 'message.rejected'
    WHEN 'pending' THEN CASE WHEN data ->> 'kind' = 'retry_scheduled' THEN 'message.retry_scheduled' END
  END
$$;
--> statement-breakpoint
CREATE FUNCTION message_events_fan_out_to_webhooks() RETURNS trigger LANGUAGE plpgsql AS $$
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
  ORDER BY e.position
  ON CONFLICT ON CONSTRAINT webhook_deliveries_event_unique DO NOTHING;
  RETURN NULL;
END
$$;
--> statement-breakpoint
CREATE TRIGGER message_events_fan_out_to_webhooks
  AFTER INSERT ON message_events
  REFERENCING NEW TABLE AS new_events
  FOR EACH STATEMENT EXECUTE FUNCTION message_events_fan_out_to_webhooks();
