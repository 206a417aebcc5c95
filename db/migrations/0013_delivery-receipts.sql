-- Delivery receipts (docs/decisions/0038): `receipt` events in message_events, folded into the
-- record's delivery columns. The event type check is only widened: every existing row passed the
-- narrower check it replaces, so it is added NOT VALID (new rows are checked; the migration does
-- not scan message_events while it holds the table's lock). The new columns have a constant
-- default: no rewrite of messages, and their check (NOT VALID too) is met by that default.
ALTER TABLE "message_events" DROP CONSTRAINT "message_events_type_valid";--> statement-breakpoint
ALTER TABLE "messages" ADD COLUMN "delivery_state" text DEFAULT 'unknown' NOT NULL;--> statement-breakpoint
ALTER TABLE "messages" ADD COLUMN "delivery_updated_at" timestamp with time zone;--> statement-breakpoint
ALTER TABLE "messages" ADD COLUMN "delivery_error_code" text;--> statement-breakpoint
ALTER TABLE "message_events" ADD CONSTRAINT "message_events_type_valid" CHECK ("message_events"."type" in ('accepted','pending','success','failed','rejected','receipt')) NOT VALID;--> statement-breakpoint
ALTER TABLE "messages" ADD CONSTRAINT "messages_delivery_state_valid" CHECK ("messages"."delivery_state" in ('unknown','sent','delivered','undelivered','bounced','complained')) NOT VALID;--> statement-breakpoint
-- A receipt's webhook event: its state's, except `sent` (not sent). The same mapping as
-- src/domain/webhooks.ts webhookEventTypeOf (test/integration/store/webhook-event-type.test.ts).
CREATE OR REPLACE FUNCTION webhook_event_type(event_type text, data jsonb) RETURNS text LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT CASE event_type
    WHEN 'accepted' THEN 'message.accepted'
    WHEN 'success' THEN 'message.succeeded'
    WHEN 'failed' THEN 'message.failed'
    WHEN 'rejected' THEN 'message.rejected'
    WHEN 'pending' THEN CASE WHEN data ->> 'kind' = 'retry_scheduled' THEN 'message.retry_scheduled' END
    WHEN 'receipt' THEN CASE WHEN data ->> 'state' IN ('delivered', 'undelivered', 'bounced', 'complained')
      THEN 'message.' || (data ->> 'state') END
  END
$$;
