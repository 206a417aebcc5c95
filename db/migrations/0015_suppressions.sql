CREATE TABLE "suppressions" (
	"id" bigserial PRIMARY KEY NOT NULL,
	"organization_id" uuid NOT NULL,
	"channel" text NOT NULL,
	"recipient_key" text NOT NULL,
	"recipient_sealed" "bytea",
	"reason" text NOT NULL,
	"message_id" uuid,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "suppressions_channel_valid" CHECK ("suppressions"."channel" in ('email','sms','push')),
	CONSTRAINT "suppressions_reason_valid" CHECK ("suppressions"."reason" in ('stop','hard_bounce','complaint','subscription_gone','manual'))
);
--> statement-breakpoint
ALTER TABLE "suppressions" ADD CONSTRAINT "suppressions_organization_id_organizations_id_fk" FOREIGN KEY ("organization_id") REFERENCES "public"."organizations"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
CREATE UNIQUE INDEX "suppressions_recipient_unique" ON "suppressions" USING btree ("organization_id","channel","recipient_key");--> statement-breakpoint
CREATE INDEX "suppressions_organization_idx" ON "suppressions" USING btree ("organization_id","id");