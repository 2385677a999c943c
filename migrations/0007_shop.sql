-- The shopper's side of the shop: an "Add to cart" that counts once, and each order's
-- status history.

-- Every "Add to cart" form carries a key the server rendered (or the page made); an add
-- whose key was seen already adds nothing. A double click before the page is interactive
-- posts the form twice with the same key, and the cart gets one line, not two.
CREATE TABLE cart_adds (
    session_id text        NOT NULL,
    add_key    text        NOT NULL,
    added_at   timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT cart_adds_pkey PRIMARY KEY (session_id, add_key),
    CONSTRAINT cart_adds_key_length CHECK (char_length(add_key) BETWEEN 1 AND 255)
);
CREATE INDEX cart_adds_added_at_idx ON cart_adds (added_at);

-- Written by the database whatever changes an order (checkout, a payment, a callback,
-- fulfillment, the reconciler), in the same transaction as the change.
CREATE TABLE order_status_changes (
    id       bigint      GENERATED ALWAYS AS IDENTITY,
    order_id uuid        NOT NULL,
    status   text        NOT NULL,
    at       timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT order_status_changes_pkey PRIMARY KEY (id),
    CONSTRAINT order_status_changes_order_fk FOREIGN KEY (order_id) REFERENCES orders (id) ON DELETE CASCADE
);
CREATE INDEX order_status_changes_order_idx ON order_status_changes (order_id, id);

CREATE FUNCTION record_order_status() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO order_status_changes (order_id, status) VALUES (NEW.id, NEW.status);
    RETURN NULL;
END
$$;

CREATE TRIGGER orders_status_created AFTER INSERT ON orders
    FOR EACH ROW EXECUTE FUNCTION record_order_status();
CREATE TRIGGER orders_status_changed AFTER UPDATE OF status ON orders
    FOR EACH ROW WHEN (OLD.status IS DISTINCT FROM NEW.status) EXECUTE FUNCTION record_order_status();

-- Orders placed before the history existed: their start, and where they are now.
INSERT INTO order_status_changes (order_id, status, at)
SELECT id, 'pending_payment', created_at FROM orders ORDER BY created_at;
INSERT INTO order_status_changes (order_id, status, at)
SELECT id, status, updated_at FROM orders WHERE status <> 'pending_payment' ORDER BY updated_at;
