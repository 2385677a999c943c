-- Idempotency keys: one row per (shopper session, key). The unique constraint is the only
-- thing that decides which of several concurrent requests executes; see server/src/idempotency.
CREATE TABLE idempotency_keys (
    scope            text        NOT NULL,
    key              text        NOT NULL,
    method           text        NOT NULL,
    route            text        NOT NULL,
    fingerprint      text        NOT NULL,
    state            text        NOT NULL,
    lease_token      uuid,
    locked_until     timestamptz,
    response_status  smallint,
    response_headers jsonb,
    response_body    bytea,
    created_at       timestamptz NOT NULL DEFAULT now(),
    completed_at     timestamptz,
    CONSTRAINT idempotency_keys_scope_key_key UNIQUE (scope, key),
    CONSTRAINT idempotency_keys_state_valid CHECK (state IN ('processing', 'completed', 'failed')),
    CONSTRAINT idempotency_keys_key_length CHECK (char_length(key) BETWEEN 1 AND 255),
    CONSTRAINT idempotency_keys_completed_has_response CHECK (
        state <> 'completed' OR (response_status IS NOT NULL AND response_body IS NOT NULL))
);
CREATE INDEX idempotency_keys_created_at_idx ON idempotency_keys (created_at);

-- Human order numbers come from a sequence, so they are unique without any check-then-insert.
CREATE SEQUENCE order_no_seq START 1001;

CREATE TABLE orders (
    id          uuid        PRIMARY KEY,
    order_no    text        NOT NULL DEFAULT 'ONC-' || nextval('order_no_seq')::text,
    session_id  text        NOT NULL,
    status      text        NOT NULL DEFAULT 'pending_payment',
    currency    text        NOT NULL,
    total_cents bigint      NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT orders_order_no_key UNIQUE (order_no),
    CONSTRAINT orders_status_valid CHECK (status IN ('pending_payment', 'paid', 'fulfilled', 'cancelled')),
    CONSTRAINT orders_total_positive CHECK (total_cents > 0)
);
CREATE INDEX orders_session_created_idx ON orders (session_id, created_at DESC);

CREATE TABLE order_items (
    order_id         uuid    NOT NULL,
    line_no          integer NOT NULL,
    sku              text    NOT NULL,
    name             text    NOT NULL,
    quantity         integer NOT NULL,
    unit_price_cents bigint  NOT NULL,
    CONSTRAINT order_items_pkey PRIMARY KEY (order_id, line_no),
    CONSTRAINT order_items_order_fk FOREIGN KEY (order_id) REFERENCES orders (id) ON DELETE CASCADE,
    CONSTRAINT order_items_product_fk FOREIGN KEY (sku) REFERENCES products (sku),
    CONSTRAINT order_items_one_line_per_sku UNIQUE (order_id, sku),
    CONSTRAINT order_items_quantity_range CHECK (quantity BETWEEN 1 AND 99)
);

-- The transactional outbox: written in the same transaction as the change it announces.
CREATE TABLE outbox_events (
    id             uuid        PRIMARY KEY,
    aggregate_type text        NOT NULL,
    aggregate_id   uuid        NOT NULL,
    event_type     text        NOT NULL,
    payload        jsonb       NOT NULL,
    created_at     timestamptz NOT NULL DEFAULT now(),
    published_at   timestamptz
);
CREATE INDEX outbox_events_unpublished_idx ON outbox_events (created_at) WHERE published_at IS NULL;
