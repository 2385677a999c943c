-- Orders made per client in the last hour, whatever became of them (docs/design.md,
-- "Hostile traffic"): the pending quota counts only orders that wait, so a client that
-- cancels each order at once was bounded by nothing. One row per order made, naming the
-- client's bucket (an IPv4 address or an IPv6 /64, written out) and when; the retention
-- round deletes rows older than the hour, so no address is kept longer than that.
CREATE TABLE client_orders (
    client_bucket text        NOT NULL,
    created_at    timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT client_orders_client_bucket_len CHECK (length(client_bucket) <= 64)
);

-- The count reads one client's last hour, oldest first; the purge reads by time.
CREATE INDEX client_orders_client_idx ON client_orders (client_bucket, created_at);
CREATE INDEX client_orders_created_at_idx ON client_orders (created_at);
