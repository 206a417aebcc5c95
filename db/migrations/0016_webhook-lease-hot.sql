-- A claim's lease no longer moves `next_attempt_at` (an indexed column: every lease wrote three
-- index entries and left them to vacuum): it sets `leased_until`, which no index holds, so the
-- lease is a HOT update when the row's page has room, which the fillfactor leaves (docs/decisions/0036).
ALTER TABLE "webhook_deliveries" ADD COLUMN "leased_until" timestamp with time zone;--> statement-breakpoint
-- A row leased before this migration: its `next_attempt_at` is its lease's end.
UPDATE "webhook_deliveries" SET "leased_until" = "next_attempt_at" WHERE "leased";--> statement-breakpoint
ALTER TABLE "webhook_deliveries" DROP COLUMN "leased";--> statement-breakpoint
ALTER TABLE "webhook_deliveries" SET (fillfactor = 70);
