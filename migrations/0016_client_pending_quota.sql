-- Orders waiting for payment are counted per client as well as per session (docs/design.md,
-- "Hostile traffic"): one client opening many sessions cannot fill the table. The client's
-- bucket (an IPv4 address or an IPv6 /64, written out) is kept only while the order waits,
-- and forgotten in the same statement that moves it on, so no address outlives the wait.
ALTER TABLE orders ADD COLUMN client_bucket text
    CONSTRAINT orders_client_bucket_len CHECK (length(client_bucket) <= 64);

-- The count reads the client's waiting orders only.
CREATE INDEX orders_pending_client_idx ON orders (client_bucket)
    WHERE status = 'pending_payment' AND client_bucket IS NOT NULL;

CREATE FUNCTION orders_forget_client() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.client_bucket := NULL;
    RETURN NEW;
END
$$;
CREATE TRIGGER orders_forget_client BEFORE UPDATE OF status ON orders
    FOR EACH ROW WHEN (NEW.status <> 'pending_payment' AND NEW.client_bucket IS NOT NULL)
    EXECUTE FUNCTION orders_forget_client();
