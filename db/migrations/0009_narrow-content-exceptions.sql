-- Narrows the two exceptions of message_events' append-only trigger (docs/decisions/0034):
--   erasing: only an `accepted` event (the one that carries content) may lose its sealed content
--     and blind indexes, and nothing else may change;
--   sealing: only an `accepted` event written before encryption (content_enc null and its whole
--     content, `recipient` included, in `data`) may be sealed, and its `data` must become exactly
--     its clear fields (src/store/content.ts CLEAR_FIELDS) with their old values: an erased event
--     cannot be refilled, and no clear field can be dropped or changed.
CREATE OR REPLACE FUNCTION message_events_refuse_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
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
$$;
