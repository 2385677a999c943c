-- The key table of the Idempotency-Key protocol (docs/design.md, "The idempotency protocol").
-- One row per (scope, key); every transition is one statement, and the database decides
-- every race: the unique constraint decides who claims a new key, `lease_token` fences
-- completion and failure against a holder whose lease was taken over.
CREATE TABLE idempotency_keys (
    scope            text        NOT NULL,
    key              text        NOT NULL,
    method           text        NOT NULL,
    -- The operation's constant identity (e.g. `POST /api/orders`).
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
    -- Set by completion and by failure; retention counts from it.
    finished_at      timestamptz,
    CONSTRAINT idempotency_keys_scope_key_key UNIQUE (scope, key),
    CONSTRAINT idempotency_keys_state_valid CHECK (state IN ('processing', 'completed', 'failed')),
    CONSTRAINT idempotency_keys_key_length CHECK (char_length(key) BETWEEN 1 AND 255),
    CONSTRAINT idempotency_keys_completed_has_response CHECK (
        state <> 'completed' OR (response_status IS NOT NULL AND response_body IS NOT NULL)),
    CONSTRAINT idempotency_keys_finished_has_time CHECK (
        (state = 'processing') = (finished_at IS NULL))
);
-- The purge's two ways out: finished keys by age, abandoned ones by their lapsed lease.
CREATE INDEX idempotency_keys_finished_at_idx ON idempotency_keys (finished_at) WHERE finished_at IS NOT NULL;
CREATE INDEX idempotency_keys_abandoned_idx ON idempotency_keys (locked_until) WHERE state = 'processing';
