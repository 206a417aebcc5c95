-- Delivery receipts (docs/decisions/0038): `receipt` events in message_events, folded into the
-- record's delivery columns. The event type check is only widened: added NOT VALID and validated
-- after, so the validation's scan of message_events does not block appends.
ALTER TABLE "message_events" DROP CONSTRAINT "message_events_type_valid";--> statement-breakpoint
ALTER TABLE "messages" ADD COLUMN "delivery_state" text DEFAULT 'unknown' NOT NULL;--> statement-breakpoint
ALTER TABLE "messages" ADD COLUMN "delivery_updated_at" timestamp with time zone;--> statement-breakpoint
ALTER TABLE "messages" ADD COLUMN "delivery_error_code" text;--> statement-breakpoint
ALTER TABLE "message_events" ADD CONSTRAINT "message_events_type_valid" CHECK ("message_events"."type" in ('accepted','pending','success','failed','rejected','receipt')) NOT VALID;--> statement-breakpoint
ALTER TABLE "message_events" VALIDATE CONSTRAINT "message_events_type_valid";--> statement-breakpoint
ALTER TABLE "messages" ADD CONSTRAINT "messages_delivery_state_valid" CHECK ("messages"."delivery_state" in ('unknown','sent','delivered','undelivered','bounced','complained'));--> statement-breakpoint
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
