-- Client ids are chosen at random by the onboarding service (src/client-onboarding/client-id.ts):
-- a sequence would tell every client how many registered before it. Existing ids stay.
ALTER TABLE "encryption"."clients" ALTER COLUMN "id" SET DATA TYPE integer;--> statement-breakpoint
ALTER TABLE "encryption"."clients" ALTER COLUMN "id" DROP DEFAULT;--> statement-breakpoint
DROP SEQUENCE IF EXISTS "encryption"."clients_id_seq";
