-- Quotas count what one session stores (docs/design.md, "Hostile traffic"): the orders it
-- has waiting for payment, found through this index whatever the number of orders it paid.
CREATE INDEX orders_pending_by_session_idx ON orders (session_id) WHERE status = 'pending_payment';
-- The keys a session claimed in the last hour, and its cart adds, are counted through their
-- unique (session, key) indexes, not indexes of their own: one on (scope, created_at) was
-- taken by the planner for the key lookups of a session with many keys, and scanned them all.
