-- Cancelling an order (docs/design.md, "Cancelling and expiry"): the shopper cancels an
-- unpaid order, and the shop cancels one nobody paid in time. Both move the order forward
-- only; the database refuses any other move, whoever writes it.
CREATE FUNCTION orders_status_moves_forward() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF (OLD.status, NEW.status) IN (('pending_payment', 'paid'), ('pending_payment', 'cancelled'),
                                    ('paid', 'fulfilled')) THEN
        RETURN NEW;
    END IF;
    RAISE EXCEPTION 'an order cannot move from % to %', OLD.status, NEW.status
        USING ERRCODE = 'check_violation', CONSTRAINT = 'orders_status_moves_forward';
END
$$;
CREATE TRIGGER orders_status_moves_forward BEFORE UPDATE OF status ON orders
    FOR EACH ROW WHEN (OLD.status IS DISTINCT FROM NEW.status)
    EXECUTE FUNCTION orders_status_moves_forward();

-- The expiry finds the oldest unpaid orders without reading the others.
CREATE INDEX orders_unpaid_idx ON orders (created_at) WHERE status = 'pending_payment';
