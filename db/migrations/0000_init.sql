CREATE SCHEMA "encryption";
--> statement-breakpoint
CREATE TABLE "api_keys" (
	"id" uuid PRIMARY KEY NOT NULL,
	"organization_id" uuid NOT NULL,
	"key_hash" text NOT NULL,
	"key_prefix" text NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"revoked_at" timestamp with time zone
);
--> statement-breakpoint
CREATE TABLE "encryption"."clients" (
	"id" serial PRIMARY KEY NOT NULL,
	"app_name" text NOT NULL,
	"contact_email" text NOT NULL,
	"api_key_hash" text NOT NULL,
	"api_key_prefix" text NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE TABLE "idempotency_keys" (
	"organization_id" uuid NOT NULL,
	"key" text NOT NULL,
	"request_hash" text NOT NULL,
	"message_id" uuid NOT NULL,
	"created_at" timestamp with time zone NOT NULL,
	CONSTRAINT "idempotency_keys_organization_id_key_pk" PRIMARY KEY("organization_id","key")
);
--> statement-breakpoint
CREATE TABLE "message_events" (
	"position" bigserial PRIMARY KEY NOT NULL,
	"message_id" uuid NOT NULL,
	"seq" integer NOT NULL,
	"type" text NOT NULL,
	"retry_count" integer NOT NULL,
	"data" jsonb NOT NULL,
	"occurred_at" timestamp with time zone NOT NULL,
	"organization_id" uuid NOT NULL,
	"transaction_id" "xid8" DEFAULT pg_current_xact_id() NOT NULL,
	CONSTRAINT "message_events_message_seq_unique" UNIQUE("message_id","seq"),
	CONSTRAINT "message_events_seq_positive" CHECK ("message_events"."seq" >= 1),
	CONSTRAINT "message_events_type_valid" CHECK ("message_events"."type" in ('accepted','pending','success','failed','rejected'))
);
--> statement-breakpoint
CREATE TABLE "messages" (
	"message_id" uuid PRIMARY KEY NOT NULL,
	"organization_id" uuid NOT NULL,
	"product_id" text NOT NULL,
	"channel" text NOT NULL,
	"status" text NOT NULL,
	"priority" text NOT NULL,
	"notification_type" text,
	"recipient" text NOT NULL,
	"sender" text NOT NULL,
	"body" text NOT NULL,
	"subject" text,
	"template_fields" jsonb,
	"retry_enabled" boolean NOT NULL,
	"retry_count" integer NOT NULL,
	"version" integer NOT NULL,
	"next_attempt_at" timestamp with time zone,
	"delivery_time" timestamp with time zone,
	"created_at" timestamp with time zone NOT NULL,
	"updated_at" timestamp with time zone NOT NULL
);
--> statement-breakpoint
CREATE TABLE "organizations" (
	"id" uuid PRIMARY KEY NOT NULL,
	"product_id" text NOT NULL,
	"name" text NOT NULL,
	"active" boolean NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
ALTER TABLE "api_keys" ADD CONSTRAINT "api_keys_organization_id_organizations_id_fk" FOREIGN KEY ("organization_id") REFERENCES "public"."organizations"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
CREATE UNIQUE INDEX "api_keys_key_hash_unique" ON "api_keys" USING btree ("key_hash");--> statement-breakpoint
CREATE INDEX "api_keys_organization_idx" ON "api_keys" USING btree ("organization_id");--> statement-breakpoint
CREATE UNIQUE INDEX "clients_app_name_unique" ON "encryption"."clients" USING btree (lower("app_name"));--> statement-breakpoint
CREATE UNIQUE INDEX "clients_api_key_hash_unique" ON "encryption"."clients" USING btree ("api_key_hash");--> statement-breakpoint
CREATE INDEX "idempotency_keys_created_idx" ON "idempotency_keys" USING btree ("created_at");--> statement-breakpoint
CREATE INDEX "messages_organization_created_idx" ON "messages" USING btree ("organization_id","created_at" DESC NULLS LAST,"message_id" DESC NULLS LAST);--> statement-breakpoint
CREATE INDEX "messages_unfinished_idx" ON "messages" USING btree ("updated_at") WHERE "messages"."status" in ('accepted','pending');--> statement-breakpoint
CREATE UNIQUE INDEX "organizations_product_name_unique" ON "organizations" USING btree ("product_id",lower("name"));