-- message_events and messages partitioned by day on message_id (docs/decisions/0042). A message id
-- is a UUIDv7, whose first 48 bits are its time in milliseconds: the ids of one UTC day lie
-- between two bounds built from the day's start, so a partition is found from the id alone and
-- the keys stay what they were (message_id, and (message_id, seq) for the events, the key a
-- partitioned table needs: it includes the partition key). `position` stays, filled by its
-- sequence, but is no longer a key. A default partition takes an id no partition covers, so an
-- insert never fails for lack of one. The worker creates the partitions ahead and drops the ones
-- past MESSAGE_RETENTION_DAYS with the functions defined here (workers/message-partitions.ts).
--
-- The rows move in this transaction: both tables are copied, then the old ones dropped. Nothing is
-- sent again: the fan-out trigger of webhooks is created after the copy.

-- The old tables aside, without their keys and indexes (whose names the new tables take).
ALTER TABLE "message_events" RENAME TO "message_events_unpartitioned";--> statement-breakpoint
ALTER TABLE "message_events_unpartitioned" DROP CONSTRAINT "message_events_pkey";--> statement-breakpoint
ALTER TABLE "message_events_unpartitioned" DROP CONSTRAINT "message_events_message_seq_unique";--> statement-breakpoint
ALTER TABLE "messages" RENAME TO "messages_unpartitioned";--> statement-breakpoint
ALTER TABLE "messages_unpartitioned" DROP CONSTRAINT "messages_pkey";--> statement-breakpoint
DROP INDEX "messages_organization_created_idx";--> statement-breakpoint
DROP INDEX "messages_unfinished_idx";--> statement-breakpoint
DROP INDEX "messages_recipient_keys_idx";--> statement-breakpoint

-- The partitioned tables: the same columns, defaults (position's sequence too) and checks.
CREATE TABLE "message_events" (
  LIKE "message_events_unpartitioned" INCLUDING DEFAULTS INCLUDING CONSTRAINTS,
  CONSTRAINT "message_events_pkey" PRIMARY KEY ("message_id", "seq")
) PARTITION BY RANGE ("message_id");--> statement-breakpoint
ALTER SEQUENCE "message_events_position_seq" OWNED BY "message_events"."position";--> statement-breakpoint
CREATE TABLE "messages" (
  LIKE "messages_unpartitioned" INCLUDING DEFAULTS INCLUDING CONSTRAINTS,
  CONSTRAINT "messages_pkey" PRIMARY KEY ("message_id")
) PARTITION BY RANGE ("message_id");--> statement-breakpoint
CREATE INDEX "messages_organization_created_idx" ON "messages" USING btree ("organization_id","created_at" DESC NULLS LAST,"message_id" DESC NULLS LAST);--> statement-breakpoint
CREATE INDEX "messages_unfinished_idx" ON "messages" USING btree ("updated_at") WHERE "messages"."status" in ('accepted','pending');--> statement-breakpoint
CREATE INDEX "messages_recipient_keys_idx" ON "messages" USING gin ("recipient_keys");--> statement-breakpoint
CREATE TABLE "message_events_default" PARTITION OF "message_events" DEFAULT;--> statement-breakpoint
CREATE TABLE "messages_default" PARTITION OF "messages" DEFAULT;--> statement-breakpoint

-- The lower bound of a day's partition: the smallest UUID whose first 48 bits are the day's start
-- (UTC) in milliseconds. Every UUIDv7 made during the day sorts between it and the next day's.
CREATE FUNCTION message_partition_bound(day date) RETURNS uuid LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT (lpad(to_hex((extract(epoch FROM day::timestamp) * 1000)::bigint), 12, '0') || repeat('0', 20))::uuid
$$;--> statement-breakpoint
-- The UTC day in a UUIDv7's first 48 bits (meaningless for other versions).
CREATE FUNCTION message_partition_day(id uuid) RETURNS date LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT (timestamp '1970-01-01'
    + ('x' || lpad(substr(replace(id::text, '-', ''), 1, 12), 16, '0'))::bit(64)::bigint * interval '1 millisecond')::date
$$;--> statement-breakpoint

-- The append-only trigger's third narrow exception: rows leaving the default partition for the
-- day partition just made for them (create_message_partitions), in the transaction that says
-- `notify.moving_from_default` and inserts them there: only a UUIDv7's row, and only once the
-- table of its day exists. The other two are migration 0009's.
CREATE OR REPLACE FUNCTION message_events_refuse_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'DELETE'
     AND TG_TABLE_NAME = 'message_events_default'
     AND current_setting('notify.moving_from_default', true) = 'on'
     AND substr(OLD.message_id::text, 15, 1) = '7'
     AND to_regclass(quote_ident('message_events_p' || to_char(message_partition_day(OLD.message_id), 'YYYYMMDD'))) IS NOT NULL
  THEN
    RETURN OLD;
  END IF;
  IF TG_OP = 'UPDATE'
     AND current_setting('notify.erasing_content', true) = 'on'
     AND OLD.type = 'accepted'
     AND NEW.content_enc IS NULL
     AND NEW.recipient_keys IS NULL
     AND (to_jsonb(NEW) - 'content_enc' - 'recipient_keys') = (to_jsonb(OLD) - 'content_enc' - 'recipient_keys')
  THEN
    RETURN NEW;
  END IF;
  IF TG_OP = 'UPDATE'
     AND current_setting('notify.sealing_content', true) = 'on'
     AND OLD.type = 'accepted'
     AND OLD.content_enc IS NULL
     AND OLD.data ? 'recipient'
     AND NEW.content_enc IS NOT NULL
     AND NEW.data = (
       SELECT coalesce(jsonb_object_agg(key, value), '{}'::jsonb)
       FROM jsonb_each(OLD.data)
       WHERE key IN ('id', 'organizationId', 'productId', 'channel', 'priority', 'notificationType',
                     'retryEnabled', 'sender', 'expiresAt')
     )
     AND (to_jsonb(NEW) - 'content_enc' - 'recipient_keys' - 'data') = (to_jsonb(OLD) - 'content_enc' - 'recipient_keys' - 'data')
  THEN
    RETURN NEW;
  END IF;
  RAISE EXCEPTION 'message_events is append-only: % is not allowed', TG_OP
    USING ERRCODE = 'restrict_violation';
END;
$$;--> statement-breakpoint

-- Creates the partitions of both tables for each UTC day from first_day to last_day that has
-- none yet; returns how many it created. Each is made beside the table, given the rows the
-- default partition holds for its day (ids from the future, or from a day whose partition was
-- missing), then attached: ATTACH takes a SHARE UPDATE EXCLUSIVE lock on the table, so appends
-- and reads go on meanwhile. The partitions of message_events refuse TRUNCATE themselves (a
-- statement trigger on a partitioned table does not reach its partitions). Concurrent callers
-- (every worker) take turns on an advisory lock.
CREATE FUNCTION create_message_partitions(first_day date, last_day date) RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
  day date;
  parent text;
  partition text;
  lower_bound uuid;
  upper_bound uuid;
  created integer := 0;
BEGIN
  PERFORM pg_advisory_xact_lock(hashtext('message_partitions'));
  FOR day IN SELECT generate_series(first_day, last_day, interval '1 day')::date LOOP
    lower_bound := message_partition_bound(day);
    upper_bound := message_partition_bound(day + 1);
    FOREACH parent IN ARRAY ARRAY['message_events', 'messages'] LOOP
      partition := parent || '_p' || to_char(day, 'YYYYMMDD');
      CONTINUE WHEN to_regclass(quote_ident(partition)) IS NOT NULL;
      EXECUTE format('CREATE TABLE %I (LIKE %I INCLUDING DEFAULTS INCLUDING CONSTRAINTS)', partition, parent);
      PERFORM set_config('notify.moving_from_default', 'on', true);
      EXECUTE format(
        'WITH moved AS (DELETE FROM %I WHERE message_id >= $1 AND message_id < $2 RETURNING *) INSERT INTO %I SELECT * FROM moved',
        parent || '_default', partition) USING lower_bound, upper_bound;
      PERFORM set_config('notify.moving_from_default', 'off', true);
      EXECUTE format('ALTER TABLE %I ATTACH PARTITION %I FOR VALUES FROM (%L) TO (%L)',
        parent, partition, lower_bound, upper_bound);
      IF parent = 'message_events' THEN
        EXECUTE format('CREATE TRIGGER message_events_no_truncate BEFORE TRUNCATE ON %I '
          'FOR EACH STATEMENT EXECUTE FUNCTION message_events_refuse_change()', partition);
      END IF;
      created := created + 1;
    END LOOP;
  END LOOP;
  RETURN created;
END;
$$;--> statement-breakpoint

-- Retention: drops the day partitions of both tables for the days before before_day, whole (no
-- row is deleted one by one, and no trigger of the append-only log fires: a partition past
-- retention is the one way events leave it). Returns how many tables it dropped. The default
-- partitions are never dropped.
CREATE FUNCTION drop_message_partitions(before_day date) RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
  partition text;
  dropped integer := 0;
BEGIN
  PERFORM pg_advisory_xact_lock(hashtext('message_partitions'));
  FOR partition IN
    SELECT c.relname FROM pg_inherits i
    JOIN pg_class c ON c.oid = i.inhrelid
    WHERE i.inhparent IN (to_regclass('message_events'), to_regclass('messages'))
      AND c.relname ~ '^(message_events|messages)_p[0-9]{8}$'
      AND to_date(right(c.relname, 8), 'YYYYMMDD') < before_day
    ORDER BY c.relname
  LOOP
    EXECUTE format('DROP TABLE %I', partition);
    dropped := dropped + 1;
  END LOOP;
  RETURN dropped;
END;
$$;--> statement-breakpoint

-- The partitions the existing rows need (each day one of their UUIDv7s was made on) and the
-- coming week's; ids of another version go to the default partition.
DO $$
DECLARE
  day date;
BEGIN
  FOR day IN
    SELECT message_partition_day(message_id) FROM message_events_unpartitioned
    WHERE substr(message_id::text, 15, 1) = '7'
    UNION
    SELECT message_partition_day(message_id) FROM messages_unpartitioned
    WHERE substr(message_id::text, 15, 1) = '7'
  LOOP
    PERFORM create_message_partitions(day, day);
  END LOOP;
  PERFORM create_message_partitions((now() AT TIME ZONE 'UTC')::date, (now() AT TIME ZONE 'UTC')::date + 7);
END;
$$;--> statement-breakpoint

-- Every row, as it was (position included: the sequence goes on from where it was).
INSERT INTO "message_events" SELECT * FROM "message_events_unpartitioned";--> statement-breakpoint
INSERT INTO "messages" SELECT * FROM "messages_unpartitioned";--> statement-breakpoint
DROP TABLE "message_events_unpartitioned";--> statement-breakpoint
DROP TABLE "messages_unpartitioned";--> statement-breakpoint

-- The log's triggers, as migrations 0001 and 0012 made them, now on the partitioned table: the
-- row trigger reaches every partition, present and future; TRUNCATE is refused on the table
-- and on each partition; the fan-out sees the rows of every partition an insert reached.
CREATE TRIGGER message_events_no_update_delete
  BEFORE UPDATE OR DELETE ON message_events
  FOR EACH ROW EXECUTE FUNCTION message_events_refuse_change();--> statement-breakpoint
CREATE TRIGGER message_events_no_truncate
  BEFORE TRUNCATE ON message_events
  FOR EACH STATEMENT EXECUTE FUNCTION message_events_refuse_change();--> statement-breakpoint
CREATE TRIGGER message_events_no_truncate
  BEFORE TRUNCATE ON message_events_default
  FOR EACH STATEMENT EXECUTE FUNCTION message_events_refuse_change();--> statement-breakpoint
CREATE TRIGGER message_events_fan_out_to_webhooks
  AFTER INSERT ON message_events
  REFERENCING NEW TABLE AS new_events
  FOR EACH STATEMENT EXECUTE FUNCTION message_events_fan_out_to_webhooks();--> statement-breakpoint
ANALYZE "message_events";--> statement-breakpoint
ANALYZE "messages";
