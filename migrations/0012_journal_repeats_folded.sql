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
