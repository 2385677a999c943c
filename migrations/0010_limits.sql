-- Quotas count what one session stores (docs/design.md, "Hostile traffic"): the orders it
-- has waiting for payment, found through this index whatever the number of orders it paid.
CREATE INDEX orders_pending_by_session_idx ON orders (session_id) WHERE status = 'pending_payment';
-- The cart adds of a session in the last hour.
CREATE INDEX cart_adds_session_added_at_idx ON cart_adds (session_id, added_at);
-- The keys a session claimed in the last hour.
CREATE INDEX idempotency_keys_scope_created_idx ON idempotency_keys (scope, created_at);
