-- pgbench (-M prepared): the statements the server runs for POST /api/orders with a new key,
-- in its order and with its transaction boundaries, one round trip each (idempotency/store.rs,
-- orders/store.rs, outbox/mod.rs, cart.rs).
-- scripts/bench passes with -D: sid (the bench session), nonce (per run), fp (the body's
-- fingerprint), name/price/currency (MUG-001), body (an order as the server answers it),
-- payload (its outbox event) and headers (its stored headers). Keys are nonce-client-random,
-- so no two clients or runs meet.
\set r random(1, 1000000000000000)

-- Read first (idempotency/store.rs `read_first`): the session exists, the key is unknown.
SELECT EXISTS (SELECT 1 FROM tower_sessions.session s
                 WHERE s.id = :sid AND s.expiry_date > now()) AS session_known,
       k.route, k.fingerprint, k.state, coalesce(k.locked_until > now(), false) AS lease_valid,
       k.response_status, k.response_headers, k.response_body
  FROM (VALUES (1)) AS one (n)
  LEFT JOIN idempotency_keys k ON k.scope = :sid AND k.key = :nonce::text || '-' || :client_id::text || '-' || :r::text;

-- The claim, in its own autocommit statement. The lease token is derived from the key, so the
-- completion below can be fenced on it as the server's is.
INSERT INTO idempotency_keys (scope, key, method, route, fingerprint, state, lease_token, locked_until)
VALUES (:sid, :nonce::text || '-' || :client_id::text || '-' || :r::text, 'POST', 'POST /api/orders',
        :fp, 'processing', md5(:r::text)::uuid, now() + 30000 * interval '1 millisecond')
ON CONFLICT ON CONSTRAINT idempotency_keys_scope_key_key DO NOTHING;

-- The order's transaction (orders/store.rs create_in_new_tx, then the executor's finish).
BEGIN;
SELECT sku, name, price_cents, currency, stock FROM products WHERE sku = ANY('{MUG-001}'::text[]);
INSERT INTO orders (id, session_id, currency, total_cents) VALUES (gen_random_uuid(), :sid, :currency, :price)
RETURNING id, order_no, created_at \gset
INSERT INTO order_items (order_id, line_no, sku, name, quantity, unit_price_cents)
SELECT :id::uuid, * FROM UNNEST('{1}'::int[], '{MUG-001}'::text[], ARRAY[:name]::text[], '{1}'::int[], ARRAY[:price]::bigint[]);
INSERT INTO order_recipients (order_id, email, name, line1, line2, postal_code, city, country)
VALUES (:id::uuid, 'ada@example.com', 'Ada Lovelace', '1 Main Street', '', 'SW1Y 4JH', 'London', 'GB');
INSERT INTO outbox_events (id, aggregate_type, aggregate_id, event_type, payload)
VALUES (gen_random_uuid(), 'order', :id::uuid, 'order.created', :payload::jsonb);
-- cart::take_ordered locks the session's cart first; the bench session has none, and then
-- the server stops there (its other three statements run only for a cart).
SELECT 1 FROM carts WHERE session_id = :sid FOR UPDATE;
-- The order journal's entry of the completed request (journal::request), in the executor's
-- on_complete hook; the order's and the outbox's entries are written by their triggers above.
INSERT INTO order_journal (order_id, kind, summary, scope_tag, idempotency_key)
SELECT id, 'request', 'POST /api/orders answered 201: executed', journal_scope_tag(:sid),
       :nonce::text || '-' || :client_id::text || '-' || :r::text
  FROM orders WHERE id = :id::uuid AND session_id = :sid;
-- store::complete, fenced on the lease.
UPDATE idempotency_keys
   SET state = 'completed', response_status = 201, response_headers = :headers::jsonb,
       response_body = convert_to(:body, 'UTF8'), completed_at = now(), finished_at = now(), locked_until = NULL
 WHERE scope = :sid AND key = :nonce::text || '-' || :client_id::text || '-' || :r::text
   AND lease_token = md5(:r::text)::uuid AND state = 'processing';
COMMIT;
