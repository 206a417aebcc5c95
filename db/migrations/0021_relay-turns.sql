ALTER TABLE "delivery_outbox" ADD COLUMN "organization_id" uuid;--> statement-breakpoint
ALTER TABLE "scheduled_deliveries" ADD COLUMN "organization_id" uuid;--> statement-breakpoint
CREATE INDEX "delivery_outbox_turns_idx" ON "delivery_outbox" USING btree ("queue_prefix","priority","organization_id","message_id");