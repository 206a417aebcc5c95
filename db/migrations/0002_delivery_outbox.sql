CREATE TABLE "delivery_outbox" (
	"message_id" uuid PRIMARY KEY NOT NULL,
	"queue_prefix" text NOT NULL,
	"priority" smallint NOT NULL
);
--> statement-breakpoint
CREATE INDEX "delivery_outbox_relay_idx" ON "delivery_outbox" USING btree ("queue_prefix","priority","message_id");