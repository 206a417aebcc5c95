CREATE TABLE "organization_senders" (
	"id" uuid PRIMARY KEY NOT NULL,
	"organization_id" uuid NOT NULL,
	"kind" text NOT NULL,
	"value" text NOT NULL,
	"verification_token" text,
	"status" text NOT NULL,
	"created_at" timestamp with time zone NOT NULL,
	"verified_at" timestamp with time zone,
	CONSTRAINT "organization_senders_unique" UNIQUE("organization_id","kind","value"),
	CONSTRAINT "organization_senders_kind_valid" CHECK ("organization_senders"."kind" in ('email_domain','sms_sender')),
	CONSTRAINT "organization_senders_status_valid" CHECK ("organization_senders"."status" in ('pending','verified'))
);
--> statement-breakpoint
ALTER TABLE "organization_senders" ADD CONSTRAINT "organization_senders_organization_id_organizations_id_fk" FOREIGN KEY ("organization_id") REFERENCES "public"."organizations"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "organization_senders_pending_idx" ON "organization_senders" USING btree ("created_at") WHERE "organization_senders"."status" = 'pending';