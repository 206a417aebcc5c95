CREATE TABLE "scheduled_deliveries" (
	"message_id" uuid PRIMARY KEY NOT NULL,
	"queue_prefix" text NOT NULL,
	"priority" smallint NOT NULL,
	"due_at" timestamp with time zone NOT NULL
);
--> statement-breakpoint
ALTER TABLE "messages" ADD COLUMN "status_reason" text;--> statement-breakpoint
ALTER TABLE "messages" ADD COLUMN "send_at" timestamp with time zone;--> statement-breakpoint
-- `status_reason` of the messages that had ended before the column existed is filled by the workers
-- afterwards, a partition at a time (workers/status-reasons.ts): an UPDATE of every ended message
-- here would hold the lock this ALTER takes on `messages` for the whole of it.
CREATE INDEX "scheduled_deliveries_due_idx" ON "scheduled_deliveries" USING btree ("queue_prefix","due_at");--> statement-breakpoint
CREATE INDEX "messages_scheduled_idx" ON "messages" USING btree ("organization_id","created_at" DESC NULLS LAST,"message_id" DESC NULLS LAST) WHERE "messages"."send_at" is not null;--> statement-breakpoint

-- Retention (migration 0018's function, whole): a dropped day's scheduled rows go with its
-- outbox rows. (The schedule's horizon keeps every scheduled message within retention,
-- docs/decisions/0044; this is for a retention shortened after the fact.)
CREATE OR REPLACE FUNCTION drop_message_partitions(before_day date, max_tables integer DEFAULT 20) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
  partition text;
  upper_day date;
  lower_bound uuid;
  dropped integer := 0;
BEGIN
  PERFORM pg_advisory_xact_lock(hashtext('message_partitions'));
  FOR partition IN
    SELECT c.relname FROM pg_inherits i
    JOIN pg_class c ON c.oid = i.inhrelid
    WHERE i.inhparent IN (to_regclass('message_events'), to_regclass('messages'))
      AND ((c.relname ~ '^(message_events|messages)_p[0-9]{8}$'
            AND to_date(right(c.relname, 8), 'YYYYMMDD') < before_day)
        OR (c.relname ~ '^(message_events|messages)_before_[0-9]{8}$'
            AND to_date(right(c.relname, 8), 'YYYYMMDD') <= before_day))
    ORDER BY to_date(right(c.relname, 8), 'YYYYMMDD'), c.relname DESC
    LIMIT max_tables
  LOOP
    EXECUTE format('DROP TABLE %I', partition);
    IF partition ~ '_before_[0-9]{8}$' THEN
      upper_day := to_date(right(partition, 8), 'YYYYMMDD');
      lower_bound := '00000000-0000-0000-0000-000000000000';
    ELSE
      upper_day := to_date(right(partition, 8), 'YYYYMMDD') + 1;
      lower_bound := message_partition_bound(upper_day - 1);
    END IF;
    DELETE FROM webhook_deliveries
    WHERE message_id >= lower_bound AND message_id < message_partition_bound(upper_day);
    DELETE FROM delivery_outbox
    WHERE message_id >= lower_bound AND message_id < message_partition_bound(upper_day);
    DELETE FROM scheduled_deliveries
    WHERE message_id >= lower_bound AND message_id < message_partition_bound(upper_day);
    dropped := dropped + 1;
  END LOOP;
  RETURN dropped;
END;
$$;
