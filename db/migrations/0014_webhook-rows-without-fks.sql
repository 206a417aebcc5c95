ALTER TABLE "webhook_attempts" DROP CONSTRAINT "webhook_attempts_endpoint_id_webhook_endpoints_id_fk";
--> statement-breakpoint
ALTER TABLE "webhook_deliveries" DROP CONSTRAINT "webhook_deliveries_endpoint_id_webhook_endpoints_id_fk";
--> statement-breakpoint
ALTER TABLE "webhook_deliveries" ADD COLUMN "leased" boolean DEFAULT false NOT NULL;