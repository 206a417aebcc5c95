-- An SMS's segments and encoding (docs/decisions/0043) on the record, null for e-mail and push and
-- for the messages already there (their events lack them; a rebuild gives null too). Nullable
-- without a default and without a check: added on the partitioned parent, the columns reach every
-- partition as a catalog change, with no rewrite or scan of the table while it is locked.
ALTER TABLE "messages" ADD COLUMN "segments" smallint;--> statement-breakpoint
ALTER TABLE "messages" ADD COLUMN "encoding" text;