-- A client retrying in a loop repeats one key hundreds of times a minute. Each repeat used to
-- be a row of its own; now the repeats of one key, of one kind, in one minute are one row
-- that counts them (docs/design.md, "The order journal"). The story keeps when they began
-- and ended; the console's per-minute rates sum the counts of the minute.
ALTER TABLE order_journal
    ADD COLUMN repeats integer NOT NULL DEFAULT 1,
    -- The minute a folded row counts (set for repeats only): the key of the fold.
    ADD COLUMN fold_minute timestamptz,
    -- The latest repeat the row counts.
    ADD COLUMN last_at timestamptz;

-- The repeats written before, folded the same way: the first of each minute counts the rest.
UPDATE order_journal SET fold_minute = date_trunc('minute', at)
 WHERE kind IN ('replay', 'in_progress', 'key_reused');
UPDATE order_journal j SET repeats = f.n, last_at = f.last_at
  FROM (SELECT min(id) AS first_id, count(*) AS n, max(at) AS last_at FROM order_journal
         WHERE fold_minute IS NOT NULL
         GROUP BY scope_tag, idempotency_key, kind, fold_minute) f
 WHERE j.id = f.first_id AND f.n > 1;
DELETE FROM order_journal j
 WHERE fold_minute IS NOT NULL
   AND EXISTS (SELECT 1 FROM order_journal e
                WHERE e.fold_minute = j.fold_minute AND e.kind = j.kind
                  AND e.scope_tag = j.scope_tag AND e.idempotency_key = j.idempotency_key
                  AND e.id < j.id);

ALTER TABLE order_journal
    ADD CONSTRAINT order_journal_repeats_positive CHECK (repeats >= 1),
    ADD CONSTRAINT order_journal_only_repeats_fold CHECK (
        (fold_minute IS NOT NULL) = (kind IN ('replay', 'in_progress', 'key_reused')));

CREATE UNIQUE INDEX order_journal_repeat_fold ON order_journal
    (scope_tag, idempotency_key, kind, fold_minute) WHERE fold_minute IS NOT NULL;
-- The console's rates read a minute's repeats.
CREATE INDEX order_journal_fold_minute_idx ON order_journal (fold_minute) WHERE fold_minute IS NOT NULL;

-- Who acted, when the transaction did not say (`journal::acting_as`): what only one part of
-- the shop does. The relay alone publishes; the mailer alone moves an email past `queued`
-- (whoever queues it is named in its transaction or is the shop); only an operator retries
-- or discards a dead letter or resolves a finding by hand (a refund's resolution is the
-- reconciler's, and says so); the consumer runtime alone buries a delivery as a dead letter;
-- the reconciler alone makes findings and refunds.
CREATE FUNCTION journal_default_actor() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF nullif(current_setting('once.actor', true), '') IS NOT NULL THEN
        RETURN NEW;
    END IF;
    NEW.actor := CASE
        WHEN NEW.kind = 'published' THEN 'relay'
        WHEN NEW.kind = 'email' AND NEW.summary !~ '^\S+ email to the shopper: queued( |$)' THEN 'mailer'
        WHEN NEW.kind = 'dead_letter'
             AND NEW.summary ~ '^\S+ to \S+: dead letter (retrying|retried|discarded) after '
            THEN 'operator'
        WHEN NEW.kind = 'dead_letter' THEN 'bus'
        WHEN NEW.kind = 'finding' AND NEW.summary ~ '^finding \S+ resolved$' THEN 'operator'
        WHEN NEW.kind IN ('finding', 'refund') THEN 'reconciler'
        ELSE NEW.actor
    END;
    RETURN NEW;
END
$$;
CREATE TRIGGER order_journal_default_actor BEFORE INSERT ON order_journal
    FOR EACH ROW EXECUTE FUNCTION journal_default_actor();
