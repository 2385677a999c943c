-- A story's page is read from a cursor through an index, in either direction, and stops at
-- the page's size (docs/design.md, "The order journal"): it costs the same at a thousand
-- entries and at a million.

-- The order's entries in story order (replaces the index on order and time alone, whose
-- ties a cursor could not step past).
CREATE INDEX order_journal_order_page_idx ON order_journal (order_id, at, id) WHERE order_id IS NOT NULL;
DROP INDEX order_journal_order_idx;

-- The money view: what happened to the order and its money, which no shopper's requests
-- or repeats can bury (the same list as `journal::read::MONEY_KINDS`).
CREATE INDEX order_journal_money_idx ON order_journal (order_id, at, id)
    WHERE order_id IS NOT NULL
      AND kind IN ('status', 'payment', 'provider_call', 'callback', 'refund',
                   'finding', 'fulfillment', 'email', 'dead_letter');

-- An order's requests, the first of which names the key that made it (read on every page:
-- without this, a story whose requests retention forgot would be walked to its end).
CREATE INDEX order_journal_requests_idx ON order_journal (order_id, at, id)
    WHERE order_id IS NOT NULL AND kind = 'request';

-- Requests and repeats by age: retention forgets them with their keys, whatever story
-- they belong to, without walking the stories still kept.
CREATE INDEX order_journal_requests_at_idx ON order_journal (at)
    WHERE kind IN ('request', 'replay', 'in_progress', 'key_reused');

-- The 409s of the key that made an order, written before the order was known.
CREATE INDEX order_journal_unlinked_idx ON order_journal (scope_tag, idempotency_key, at, id)
    WHERE order_id IS NULL;

-- A callback is applied to the attempt its reference names; its charge id only says which
-- order it is about when the reference names no attempt of ours. (Before, the charge won:
-- a callback naming attempt A and order B's charge was written into B's story, not A's.)
CREATE OR REPLACE FUNCTION journal_order_of_payment(p_payment text, p_charge text) RETURNS uuid
LANGUAGE sql STABLE AS $$
    SELECT coalesce(
        (SELECT order_id FROM payments
          WHERE p_payment ~* '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$'
            AND id = p_payment::uuid),
        (SELECT order_id FROM payments WHERE provider_charge_id = p_charge))
$$;
