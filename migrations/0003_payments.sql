-- Payment attempts. One attempt per (session, Idempotency-Key): a retry of the same request
-- resumes the same attempt, and the provider is charged with a key derived from its id.
CREATE TABLE payments (
    id                 uuid        NOT NULL,
    order_id           uuid        NOT NULL,
    idempotency_scope  text        NOT NULL,
    idempotency_key    text        NOT NULL,
    status             text        NOT NULL DEFAULT 'pending',
    amount_cents       bigint      NOT NULL,
    currency           text        NOT NULL,
    provider_charge_id text,
    failure_code       text,
    created_at         timestamptz NOT NULL DEFAULT now(),
    updated_at         timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT payments_pkey PRIMARY KEY (id),
    CONSTRAINT payments_order_fk FOREIGN KEY (order_id) REFERENCES orders (id),
    CONSTRAINT payments_attempt_key UNIQUE (idempotency_scope, idempotency_key),
    CONSTRAINT payments_provider_charge_id_key UNIQUE (provider_charge_id),
    CONSTRAINT payments_status_valid CHECK (status IN ('pending', 'succeeded', 'failed')),
    CONSTRAINT payments_amount_positive CHECK (amount_cents > 0)
);
CREATE INDEX payments_order_idx ON payments (order_id);

-- The last line of defence: whatever happens above, an order has at most one succeeded payment.
CREATE UNIQUE INDEX payments_one_success_per_order ON payments (order_id) WHERE status = 'succeeded';

-- Every provider callback ever received, keyed by the provider's transaction number: a
-- duplicate delivery conflicts here and changes nothing.
CREATE TABLE payment_callbacks (
    provider_tx_no text        NOT NULL,
    event_id       text        NOT NULL,
    event_type     text        NOT NULL,
    charge_id      text,
    payload        jsonb       NOT NULL,
    outcome        text        NOT NULL DEFAULT 'received',
    received_at    timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT payment_callbacks_pkey PRIMARY KEY (provider_tx_no)
);
