-- message_events stays append-only, with two narrow exceptions (docs/decisions/0034), each only
-- in a transaction that names it with `set local`, each changing an `accepted` event's content
-- and nothing else, so the log keeps every event, its sequence and its shape:
--   notify.erasing_content = 'on': the sealed content and the recipients' blind indexes become
--     null (a recipient's data erased);
--   notify.sealing_content = 'on': an event written before encryption gets its content sealed:
--     `data` loses the fields now sealed (it keeps a subset of what it had), `content_enc` and
--     `recipient_keys` are set where they were null (`npm run content:seal-existing`).
CREATE OR REPLACE FUNCTION message_events_refuse_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'UPDATE'
     AND current_setting('notify.erasing_content', true) = 'on'
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
     AND NEW.content_enc IS NOT NULL
     AND OLD.data @> NEW.data
     AND (to_jsonb(NEW) - 'content_enc' - 'recipient_keys' - 'data') = (to_jsonb(OLD) - 'content_enc' - 'recipient_keys' - 'data')
  THEN
    RETURN NEW;
  END IF;
  RAISE EXCEPTION 'message_events is append-only: % is not allowed', TG_OP
    USING ERRCODE = 'restrict_violation';
END;
$$;
