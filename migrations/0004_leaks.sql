-- Closing the leaks (see docs: the defences table). Every rule below is enforced by the
-- database, so it holds for every server instance and every code path.

-- Keys are purged by how long ago they finished (completed or failed), never while a
-- request holds them; finished_at is set by both transitions.
ALTER TABLE idempotency_keys ADD COLUMN finished_at timestamptz;
UPDATE idempotency_keys SET finished_at = coalesce(completed_at, created_at) WHERE state <> 'processing';
ALTER TABLE idempotency_keys ADD CONSTRAINT idempotency_keys_finished_has_time CHECK (
    (state = 'processing') = (finished_at IS NULL));
DROP INDEX idempotency_keys_created_at_idx;
CREATE INDEX idempotency_keys_finished_at_idx ON idempotency_keys (finished_at) WHERE finished_at IS NOT NULL;
CREATE INDEX idempotency_keys_abandoned_idx ON idempotency_keys (locked_until) WHERE state = 'processing';

-- A charge that succeeded for an order that can no longer take it (already paid, cancelled)
-- is owed back to the shopper: refund_due, never a second success.
ALTER TABLE payments DROP CONSTRAINT payments_status_valid;
ALTER TABLE payments ADD CONSTRAINT payments_status_valid
    CHECK (status IN ('pending', 'succeeded', 'failed', 'refund_due'));

-- At most one payment attempt in flight per order: a second "Pay" under another key while
-- one is pending is refused here (409 payment-in-progress) before anything is charged.
CREATE UNIQUE INDEX payments_one_pending_per_order ON payments (order_id) WHERE status = 'pending';

-- When the provider was last asked to charge the attempt. Another intent may close a
-- pending attempt as "never charged" only after a quiet grace period since this moment,
-- and a charge call first stamps it on a still-pending attempt: the two are serialized on
-- the row, so an attempt is never closed while a call to charge it may be under way.
ALTER TABLE payments ADD COLUMN charge_requested_at timestamptz;

-- What became of each callback, from a closed list.
UPDATE payment_callbacks SET outcome = 'refund_due' WHERE outcome = 'second_success';
ALTER TABLE payment_callbacks ADD CONSTRAINT payment_callbacks_outcome_valid CHECK (outcome IN (
    'received', 'applied', 'already_applied', 'refund_due', 'ignored',
    'unknown_payment', 'amount_mismatch', 'conflict', 'malformed'));

-- The cart lives in the database, keyed by the shopper's session, so that the transaction
-- that creates an order empties it: an order and a full cart never exist together.
-- checkout_key is the Idempotency-Key of the cart's pending checkout intent: every
-- checkout page shows the same key until the intent ends (an order, or a refusal).
CREATE TABLE carts (
    session_id   text        NOT NULL,
    checkout_key text        NOT NULL,
    updated_at   timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT carts_pkey PRIMARY KEY (session_id)
);

CREATE TABLE cart_lines (
    session_id text    NOT NULL,
    sku        text    NOT NULL,
    quantity   integer NOT NULL,
    added_at   timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT cart_lines_pkey PRIMARY KEY (session_id, sku),
    CONSTRAINT cart_lines_cart_fk FOREIGN KEY (session_id) REFERENCES carts (session_id) ON DELETE CASCADE,
    CONSTRAINT cart_lines_product_fk FOREIGN KEY (sku) REFERENCES products (sku),
    CONSTRAINT cart_lines_quantity_range CHECK (quantity BETWEEN 1 AND 99)
);
