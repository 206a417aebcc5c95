-- message_events is the source of truth: history is appended, never rewritten.
CREATE FUNCTION message_events_refuse_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION 'message_events is append-only: % is not allowed', TG_OP
    USING ERRCODE = 'restrict_violation';
END;
$$;
--> statement-breakpoint
CREATE TRIGGER message_events_no_update_delete
  BEFORE UPDATE OR DELETE ON message_events
  FOR EACH ROW EXECUTE FUNCTION message_events_refuse_change();
--> statement-breakpoint
CREATE TRIGGER message_events_no_truncate
  BEFORE TRUNCATE ON message_events
  FOR EACH STATEMENT EXECUTE FUNCTION message_events_refuse_change();
