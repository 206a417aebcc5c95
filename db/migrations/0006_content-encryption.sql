CREATE TABLE "organization_data_keys" (
	"id" uuid PRIMARY KEY NOT NULL,
	"organization_id" uuid NOT NULL,
	"master_key_id" text NOT NULL,
	"wrapped_key" "bytea",
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"destroyed_at" timestamp with time zone
);
--> statement-breakpoint
ALTER TABLE "messages" ALTER COLUMN "recipient" DROP NOT NULL;--> statement-breakpoint
ALTER TABLE "message_events" ADD COLUMN "content_enc" "bytea";--> statement-breakpoint
ALTER TABLE "message_events" ADD COLUMN "recipient_keys" text[];--> statement-breakpoint
ALTER TABLE "messages" ADD COLUMN "content_enc" "bytea";--> statement-breakpoint
ALTER TABLE "messages" ADD COLUMN "recipient_keys" text[];--> statement-breakpoint
ALTER TABLE "organization_data_keys" ADD CONSTRAINT "organization_data_keys_organization_id_organizations_id_fk" FOREIGN KEY ("organization_id") REFERENCES "public"."organizations"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
CREATE UNIQUE INDEX "organization_data_keys_live_unique" ON "organization_data_keys" USING btree ("organization_id") WHERE "organization_data_keys"."wrapped_key" is not null;--> statement-breakpoint
CREATE INDEX "organization_data_keys_organization_idx" ON "organization_data_keys" USING btree ("organization_id");