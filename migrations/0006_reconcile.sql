-- The reconciler: runs, their findings, one run at a time (a lease row), and the refunds
-- made. See docs/design.md, "Reconciliation".

ALTER TABLE payments DROP CONSTRAINT payments_status_valid;
ALTER TABLE payments ADD CONSTRAINT payments_status_valid
    CHECK (status IN ('pending', 'succeeded', 'failed', 'refund_due', 'refunded'));

-- One row: whoever holds an unexpired lease runs; everyone else skips.
CREATE TABLE reconcile_lease (
    name        text        NOT NULL,
    holder      uuid,
    lease_until timestamptz NOT NULL DEFAULT '-infinity',
    CONSTRAINT reconcile_lease_pkey PRIMARY KEY (name)
);
INSERT INTO reconcile_lease (name) VALUES ('reconciler');

CREATE TABLE reconcile_runs (
    id            uuid        NOT NULL,
    status        text        NOT NULL DEFAULT 'running',
    ledger_since  timestamptz,
    -- The latest ledger time this run saw; the next run starts an overlap window before it.
    ledger_until  timestamptz,
    charges_seen  integer     NOT NULL DEFAULT 0,
    findings      integer     NOT NULL DEFAULT 0,
    error         text,
    started_at    timestamptz NOT NULL DEFAULT now(),
    finished_at   timestamptz,
    CONSTRAINT reconcile_runs_pkey PRIMARY KEY (id),
    CONSTRAINT reconcile_runs_status_valid CHECK (status IN ('running', 'finished', 'failed'))
);

-- A finding is recorded once per (kind, subject): a second run that sees the same thing
-- again adds nothing.
CREATE TABLE reconcile_findings (
    id                 uuid        NOT NULL,
    run_id             uuid        NOT NULL,
    kind               text        NOT NULL,
    subject            text        NOT NULL,
    payment_id         uuid,
    provider_charge_id text,
    status             text        NOT NULL,
    detail             text        NOT NULL,
    created_at         timestamptz NOT NULL DEFAULT now(),
    resolved_at        timestamptz,
    CONSTRAINT reconcile_findings_pkey PRIMARY KEY (id),
    CONSTRAINT reconcile_findings_once UNIQUE (kind, subject),
    CONSTRAINT reconcile_findings_run_fk FOREIGN KEY (run_id) REFERENCES reconcile_runs (id),
    CONSTRAINT reconcile_findings_kind_valid CHECK (kind IN (
        'missed_success', 'double_charge', 'refund_due', 'stranded_pending',
        'amount_mismatch', 'unknown_reference', 'unknown_to_provider')),
    CONSTRAINT reconcile_findings_status_valid CHECK (status IN ('repaired', 'open', 'resolved'))
);

-- Refunds made at the provider, one per charge (the provider agrees: one refund per charge,
-- and our refund key is derived from the charge).
CREATE TABLE provider_refunds (
    provider_charge_id text        NOT NULL,
    payment_id         uuid,
    provider_refund_id text        NOT NULL,
    created_at         timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT provider_refunds_pkey PRIMARY KEY (provider_charge_id)
);
