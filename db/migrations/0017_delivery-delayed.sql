-- Delayed DSNs as history only (docs/decisions/0040, amended 2026-11-25): `delivery_delayed`
-- events in message_events. The event type check is only widened: every existing row passed the
-- narrower check it replaces, so it is added NOT VALID (new rows are checked; the migration does
-- not scan message_events while it holds the table's lock). `webhook_event_type` (0013) is
-- unchanged: its CASE has no branch for the new type, so it maps it to null (no webhook), as
-- src/domain/webhooks.ts webhookEventTypeOf does.
ALTER TABLE "message_events" DROP CONSTRAINT "message_events_type_valid";--> statement-breakpoint
ALTER TABLE "message_events" ADD CONSTRAINT "message_events_type_valid" CHECK ("message_events"."type" in ('accepted','pending','success','failed','rejected','receipt','delivery_delayed')) NOT VALID;
