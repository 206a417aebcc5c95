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
-- day partition just made for them (create_message_partition), in the transaction that sets
-- `notify.moving_from_default` to that day and inserts them there: only a row whose id lies in
-- that day's range (whatever its UUID version: routing is by value), and only once the day's
-- table exists. The other two are migration 0009's.
CREATE OR REPLACE FUNCTION message_events_refuse_change() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  moving text;
  day date;
BEGIN
  IF TG_OP = 'DELETE' AND TG_TABLE_NAME = 'message_events_default' THEN
    moving := current_setting('notify.moving_from_default', true);
    IF moving ~ '^[0-9]{4}-[0-9]{2}-[0-9]{2}$' THEN
      day := moving::date;
      IF OLD.message_id >= message_partition_bound(day)
         AND OLD.message_id < message_partition_bound(day + 1)
         AND to_regclass(quote_ident('message_events_p' || to_char(day, 'YYYYMMDD'))) IS NOT NULL
      THEN
        RETURN OLD;
      END IF;
    END IF;
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

-- Creates the partition of one table ('message_events' or 'messages') for one UTC day, unless it
-- exists; returns 1 if it made it, else 0. The worker calls it once per table, day and
-- transaction: a day that fails does not hold back the others, a transaction holds the locks of
-- one table it made (not of many), and it never holds one default partition's lock while waiting
-- for the other's (an accept writes to both, in either order: that would deadlock). The table is
-- made beside its parent, given the rows the default partition holds in the day's id range (ids
-- from the future, from a day whose partition was missing, or of another UUID version whose first
-- 48 bits fall in the range), then attached. The default partition is locked first (EXCLUSIVE:
-- reads of it go on, a row routed to it waits), so no row of the day can reach it between the
-- move and the ATTACH, which would then fail; the ATTACH itself takes an ACCESS EXCLUSIVE lock on
-- the default partition and scans it (kept empty, that is a moment), during which reads of the
-- parent wait too. A day below a history partition's bound (the migration's, see below) is covered
-- already: skipped. A partition of message_events refuses TRUNCATE itself (a statement trigger on
-- a partitioned table does not reach its partitions). Concurrent callers (every worker) take
-- turns on an advisory lock.
CREATE FUNCTION create_message_partition(parent text, day date) RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
  partition text := parent || '_p' || to_char(day, 'YYYYMMDD');
  lower_bound uuid := message_partition_bound(day);
  upper_bound uuid := message_partition_bound(day + 1);
BEGIN
  IF parent NOT IN ('message_events', 'messages') THEN
    RAISE EXCEPTION 'not a partitioned message table: %', parent USING ERRCODE = 'invalid_parameter_value';
  END IF;
  PERFORM pg_advisory_xact_lock(hashtext('message_partitions'));
  IF to_regclass(quote_ident(partition)) IS NOT NULL OR EXISTS (
    SELECT 1 FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
    WHERE i.inhparent = to_regclass(parent)
      AND c.relname ~ ('^' || parent || '_before_[0-9]{8}$')
      AND to_date(right(c.relname, 8), 'YYYYMMDD') > day)
  THEN
    RETURN 0;
  END IF;
  EXECUTE format('LOCK TABLE %I IN EXCLUSIVE MODE', parent || '_default');
  EXECUTE format('CREATE TABLE %I (LIKE %I INCLUDING DEFAULTS INCLUDING CONSTRAINTS)', partition, parent);
  PERFORM set_config('notify.moving_from_default', day::text, true);
  EXECUTE format(
    'WITH moved AS (DELETE FROM %I WHERE message_id >= $1 AND message_id < $2 RETURNING *) INSERT INTO %I SELECT * FROM moved',
    parent || '_default', partition) USING lower_bound, upper_bound;
  PERFORM set_config('notify.moving_from_default', '', true);
  EXECUTE format('ALTER TABLE %I ATTACH PARTITION %I FOR VALUES FROM (%L) TO (%L)',
    parent, partition, lower_bound, upper_bound);
  IF parent = 'message_events' THEN
    EXECUTE format('CREATE TRIGGER message_events_no_truncate BEFORE TRUNCATE ON %I '
      'FOR EACH STATEMENT EXECUTE FUNCTION message_events_refuse_change()', partition);
  END IF;
  RETURN 1;
END;
$$;--> statement-breakpoint

-- create_message_partition for both tables and each day from first_day to last_day, in the
-- caller's transaction: for the migration and for a few days by hand (the worker makes one table
-- of one day per transaction). Returns how many tables it created.
CREATE FUNCTION create_message_partitions(first_day date, last_day date) RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
  day date;
  created integer := 0;
BEGIN
  FOR day IN SELECT generate_series(first_day, last_day, interval '1 day')::date LOOP
    created := created + create_message_partition('message_events', day) + create_message_partition('messages', day);
  END LOOP;
  RETURN created;
END;
$$;--> statement-breakpoint

-- The UTC days from first_day to last_day of the UUIDv7 ids the default partitions hold: the days
-- the worker makes partitions for besides the coming week's (read through each default
-- partition's primary key, on the id range of those days).
CREATE FUNCTION message_partition_days_in_default(first_day date, last_day date) RETURNS SETOF date
LANGUAGE sql STABLE AS $$
  SELECT message_partition_day(message_id) FROM message_events_default
  WHERE message_id >= message_partition_bound(first_day) AND message_id < message_partition_bound(last_day + 1)
    AND substr(message_id::text, 15, 1) = '7'
  UNION
  SELECT message_partition_day(message_id) FROM messages_default
  WHERE message_id >= message_partition_bound(first_day) AND message_id < message_partition_bound(last_day + 1)
    AND substr(message_id::text, 15, 1) = '7'
  ORDER BY 1
$$;--> statement-breakpoint

-- Retention: drops the partitions of both tables that hold only days before before_day, whole
-- (no row is deleted one by one, and no trigger of the append-only log fires: a partition past
-- retention is the one way events leave it), oldest first, at most max_tables in one call: the
-- worker calls it again, each time in a transaction of its own, until it drops fewer (a
-- transaction holds the locks of the tables it dropped until it ends). Returns how many tables it
-- dropped. The day partitions are `<table>_pYYYYMMDD`; a history partition
-- `<table>_before_YYYYMMDD` holds every id below that day's bound. The default partitions are
-- never dropped. In the same transaction, the rows of webhook_deliveries and delivery_outbox in a
-- dropped partition's id range go too: a delivery whose message is gone would be leased by every
-- claim and never sent nor settled (the claim joins the message), and with a short retention
-- enough of them block their endpoint for good. Of a day, messages' partition is dropped before
-- message_events' (so the ACCESS EXCLUSIVE locks on the parents are taken in that order, the
-- order in which the webhook claim reads them: the other would risk a deadlock with it).
CREATE FUNCTION drop_message_partitions(before_day date, max_tables integer DEFAULT 20) RETURNS integer
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
    dropped := dropped + 1;
  END LOOP;
  RETURN dropped;
END;
$$;--> statement-breakpoint

-- The partitions of the existing rows. A migration runs in one transaction, which holds the
-- locks of every table it makes (a few dozen per day): so only the last 14 days (the shortest
-- MESSAGE_RETENTION_DAYS) and the coming week get a partition per day; every id below the bound
-- of 14 days ago goes to ONE history partition per table, `<table>_before_YYYYMMDD`, made only
-- when there are such rows, which retention drops whole once that day is past
-- MESSAGE_RETENTION_DAYS (docs/operations.md, upgrade notes). Other ids (another UUID version,
-- or a UUIDv7 further ahead than a week) go to the default partition, whose UUIDv7 rows the
-- worker moves into their day's partition when it makes it.
DO $$
DECLARE
  today date := (now() AT TIME ZONE 'UTC')::date;
  history_day date := (now() AT TIME ZONE 'UTC')::date - 14;
  day date;
  parent text;
BEGIN
  IF EXISTS (SELECT 1 FROM message_events_unpartitioned WHERE message_id < message_partition_bound(history_day))
     OR EXISTS (SELECT 1 FROM messages_unpartitioned WHERE message_id < message_partition_bound(history_day))
  THEN
    FOREACH parent IN ARRAY ARRAY['message_events', 'messages'] LOOP
      EXECUTE format('CREATE TABLE %I PARTITION OF %I FOR VALUES FROM (MINVALUE) TO (%L)',
        parent || '_before_' || to_char(history_day, 'YYYYMMDD'), parent, message_partition_bound(history_day));
    END LOOP;
    EXECUTE format('CREATE TRIGGER message_events_no_truncate BEFORE TRUNCATE ON %I '
      'FOR EACH STATEMENT EXECUTE FUNCTION message_events_refuse_change()',
      'message_events_before_' || to_char(history_day, 'YYYYMMDD'));
  END IF;
  FOR day IN
    SELECT message_partition_day(message_id) FROM message_events_unpartitioned
    WHERE substr(message_id::text, 15, 1) = '7'
      AND message_id >= message_partition_bound(history_day) AND message_id < message_partition_bound(today + 8)
    UNION
    SELECT message_partition_day(message_id) FROM messages_unpartitioned
    WHERE substr(message_id::text, 15, 1) = '7'
      AND message_id >= message_partition_bound(history_day) AND message_id < message_partition_bound(today + 8)
    UNION
    SELECT generate_series(today, today + 7, interval '1 day')::date
  LOOP
    PERFORM create_message_partitions(day, day);
  END LOOP;
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
