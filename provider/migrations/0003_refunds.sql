-- Refunds: idempotent on the caller's key, one (full) refund per charge.
CREATE TABLE refunds (
    id                  text        NOT NULL,
    charge_id           text        NOT NULL,
    idempotency_key     text        NOT NULL,
    request_fingerprint text        NOT NULL,
    amount_cents        bigint      NOT NULL,
    currency            text        NOT NULL,
    reference           text        NOT NULL,
    created_at          timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT refunds_pkey PRIMARY KEY (id),
    CONSTRAINT refunds_idempotency_key_key UNIQUE (idempotency_key),
    CONSTRAINT refunds_one_per_charge UNIQUE (charge_id),
    CONSTRAINT refunds_charge_fk FOREIGN KEY (charge_id) REFERENCES charges (id)
);

-- The ledger is read by time (with an overlap window on the reader's side), not by tx_no,
-- which is handed out at insert and does not follow commit order.
CREATE INDEX charges_created_idx ON charges (created_at, id);
CREATE INDEX refunds_created_idx ON refunds (created_at, id);
