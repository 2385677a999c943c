-- The provider's own books. `tx_no` orders the ledger and is the cursor of
-- GET /v1/transactions; webhooks name it as the provider transaction number.
CREATE TABLE charges (
    id                  text        NOT NULL,
    tx_no               bigint      GENERATED ALWAYS AS IDENTITY,
    idempotency_key     text        NOT NULL,
    request_fingerprint text        NOT NULL,
    amount_cents        bigint      NOT NULL,
    currency            text        NOT NULL,
    card_last4          text        NOT NULL,
    reference           text        NOT NULL,
    status              text        NOT NULL,
    failure_code        text,
    created_at          timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT charges_pkey PRIMARY KEY (id),
    CONSTRAINT charges_tx_no_key UNIQUE (tx_no),
    CONSTRAINT charges_idempotency_key_key UNIQUE (idempotency_key),
    CONSTRAINT charges_status_valid CHECK (status IN ('succeeded', 'failed')),
    CONSTRAINT charges_amount_positive CHECK (amount_cents > 0)
);

-- The durable webhook queue: one row per delivery (chaos may add copies of an event).
CREATE TABLE webhook_deliveries (
    id              bigint      GENERATED ALWAYS AS IDENTITY,
    event_id        text        NOT NULL,
    tx_no           text        NOT NULL,
    event_type      text        NOT NULL,
    payload         jsonb       NOT NULL,
    attempts        integer     NOT NULL DEFAULT 0,
    next_attempt_at timestamptz NOT NULL DEFAULT now(),
    delivered_at    timestamptz,
    last_error      text,
    CONSTRAINT webhook_deliveries_pkey PRIMARY KEY (id)
);
CREATE INDEX webhook_deliveries_due_idx ON webhook_deliveries (next_attempt_at) WHERE delivered_at IS NULL;
