-- The example's own table; the key table comes from once-pg's migration.
CREATE TABLE transfers (
    id           uuid        NOT NULL,
    api_key      text        NOT NULL,
    from_account text        NOT NULL,
    to_account   text        NOT NULL,
    amount_cents bigint      NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT transfers_pkey PRIMARY KEY (id),
    CONSTRAINT transfers_amount_positive CHECK (amount_cents > 0)
);
CREATE INDEX transfers_api_key_idx ON transfers (api_key);
