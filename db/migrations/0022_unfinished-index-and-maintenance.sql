CREATE TABLE "maintenance_done" (
	"name" text PRIMARY KEY NOT NULL,
	"done_at" timestamp with time zone NOT NULL
);
--> statement-breakpoint
DROP INDEX "messages_unfinished_idx";--> statement-breakpoint
CREATE INDEX "messages_unfinished_idx" ON "messages" USING btree (greatest("updated_at", "send_at")) WHERE "messages"."status" in ('accepted','pending');