-- The order journal (docs/design.md, "The order journal"): one row per thing that happened to
-- an order, written in the transaction of that thing. What changes a row of ours is written by
-- the triggers below, so no code path can forget it; what changes no row (a replayed request,
-- a duplicate webhook, a redelivery the consumer skipped, the request that completed) is
-- written by the code that sees it (server/src/journal).
CREATE TABLE order_journal (
    id              bigint      GENERATED ALWAYS AS IDENTITY,
    -- NULL only for a request whose order is not known yet (a 409 while the order is being
    -- made): it is found through its key, whose first execution names the order.
    order_id        uuid,
    at              timestamptz NOT NULL DEFAULT clock_timestamp(),
    kind            text        NOT NULL,
    -- Who did it: set for its transaction by the code acting (`journal::acting_as`).
    actor           text        NOT NULL DEFAULT coalesce(nullif(current_setting('once.actor', true), ''), 'shop'),
    summary         text        NOT NULL,
    -- A request's key, and a digest of its scope (the session; never the session id itself,
    -- which is a credential): keys are per session, so a key alone names no request.
    scope_tag       text,
    idempotency_key text,
    payment_id      uuid,
    charge_id       text,
    event_id        uuid,
    CONSTRAINT order_journal_pkey PRIMARY KEY (id),
    CONSTRAINT order_journal_kind_valid CHECK (kind IN (
        'request', 'replay', 'in_progress', 'key_reused', 'status', 'payment', 'provider_call',
        'callback', 'event', 'published', 'delivery', 'dedup', 'dead_letter', 'fulfillment',
        'email', 'finding', 'refund')),
    CONSTRAINT order_journal_names_its_order CHECK (order_id IS NOT NULL OR idempotency_key IS NOT NULL),
    CONSTRAINT order_journal_key_has_scope CHECK ((idempotency_key IS NULL) = (scope_tag IS NULL))
);
CREATE INDEX order_journal_order_idx ON order_journal (order_id, at) WHERE order_id IS NOT NULL;
CREATE INDEX order_journal_key_idx ON order_journal (idempotency_key) WHERE idempotency_key IS NOT NULL;
CREATE INDEX order_journal_payment_idx ON order_journal (payment_id) WHERE payment_id IS NOT NULL;
CREATE INDEX order_journal_charge_idx ON order_journal (charge_id) WHERE charge_id IS NOT NULL;
CREATE INDEX order_journal_event_idx ON order_journal (event_id) WHERE event_id IS NOT NULL;
CREATE INDEX order_journal_at_idx ON order_journal (at);

-- The scope's digest, the same wherever it is computed.
CREATE FUNCTION journal_scope_tag(scope text) RETURNS text LANGUAGE sql IMMUTABLE AS $$
    SELECT left(encode(sha256(convert_to(scope, 'UTF8')), 'hex'), 16)
$$;

CREATE FUNCTION journal_write(p_order uuid, p_kind text, p_summary text, p_payment uuid,
                              p_charge text, p_event uuid) RETURNS void LANGUAGE sql AS $$
    INSERT INTO order_journal (order_id, kind, summary, payment_id, charge_id, event_id)
    SELECT p_order, p_kind, p_summary, p_payment, p_charge, p_event WHERE p_order IS NOT NULL
$$;

-- The order a payment belongs to, by its id or by its provider charge.
CREATE FUNCTION journal_order_of_payment(p_payment text, p_charge text) RETURNS uuid
LANGUAGE sql STABLE AS $$
    SELECT coalesce(
        (SELECT order_id FROM payments WHERE provider_charge_id = p_charge),
        (SELECT order_id FROM payments
          WHERE p_payment ~* '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$'
            AND id = p_payment::uuid))
$$;

-- Orders: the status history keeps its table (the shopper's page reads it); the journal gets
-- the same change.
CREATE OR REPLACE FUNCTION record_order_status() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO order_status_changes (order_id, status) VALUES (NEW.id, NEW.status);
    PERFORM journal_write(NEW.id, 'status',
        CASE TG_OP WHEN 'INSERT' THEN 'order ' || NEW.order_no || ' placed: ' || NEW.status
                   ELSE 'order ' || OLD.status || ' → ' || NEW.status END,
        NULL, NULL, NULL);
    RETURN NULL;
END
$$;

CREATE FUNCTION journal_payment() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        PERFORM journal_write(NEW.order_id, 'payment',
            'payment attempt recorded (recovery point 1), ' || NEW.amount_cents || ' ' || NEW.currency,
            NEW.id, NULL, NULL);
    ELSIF NEW.charge_requested_at IS DISTINCT FROM OLD.charge_requested_at THEN
        PERFORM journal_write(NEW.order_id, 'provider_call',
            'charge call to the provider started (recovery point 2; provider key from the attempt)',
            NEW.id, NULL, NULL);
    END IF;
    IF TG_OP = 'UPDATE' AND NEW.status IS DISTINCT FROM OLD.status THEN
        PERFORM journal_write(NEW.order_id, 'payment',
            'payment ' || OLD.status || ' → ' || NEW.status
                || coalesce(' (' || NEW.failure_code || ')', '')
                || coalesce(', charge ' || NEW.provider_charge_id, ''),
            NEW.id, NEW.provider_charge_id, NULL);
    END IF;
    RETURN NULL;
END
$$;
CREATE TRIGGER payments_journal_insert AFTER INSERT ON payments
    FOR EACH ROW EXECUTE FUNCTION journal_payment();
CREATE TRIGGER payments_journal_update AFTER UPDATE OF status, charge_requested_at ON payments
    FOR EACH ROW EXECUTE FUNCTION journal_payment();

-- A callback's outcome is set once, in the transaction that applies it; a duplicate delivery
-- changes no row and is written by the callback route.
CREATE FUNCTION journal_callback() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM journal_write(
        journal_order_of_payment(NEW.payload -> 'data' ->> 'reference', NEW.charge_id),
        'callback',
        'callback ' || NEW.event_type || ' (provider tx ' || NEW.provider_tx_no || '): ' || NEW.outcome,
        NULL, NEW.charge_id, NULL);
    RETURN NULL;
END
$$;
CREATE TRIGGER payment_callbacks_journal AFTER UPDATE OF outcome ON payment_callbacks
    FOR EACH ROW WHEN (OLD.outcome IS DISTINCT FROM NEW.outcome) EXECUTE FUNCTION journal_callback();

CREATE FUNCTION journal_outbox() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        PERFORM journal_write(NEW.aggregate_id, 'event',
            NEW.event_type || ' recorded in the outbox', NULL, NULL, NEW.id);
    ELSE
        PERFORM journal_write(NEW.aggregate_id, 'published',
            NEW.event_type || ' published to the bus', NULL, NULL, NEW.id);
    END IF;
    RETURN NULL;
END
$$;
CREATE TRIGGER outbox_events_journal_insert AFTER INSERT ON outbox_events
    FOR EACH ROW WHEN (NEW.aggregate_type = 'order') EXECUTE FUNCTION journal_outbox();
CREATE TRIGGER outbox_events_journal_published AFTER UPDATE OF published_at ON outbox_events
    FOR EACH ROW WHEN (NEW.aggregate_type = 'order' AND OLD.published_at IS NULL
                       AND NEW.published_at IS NOT NULL) EXECUTE FUNCTION journal_outbox();

-- A consumer's first delivery of an event, with the outcome its handler set by the commit
-- (deferred to the commit, so it is one entry with the last word).
CREATE FUNCTION journal_consumed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM journal_write(e.aggregate_id, 'delivery',
        e.event_type || ' delivered to ' || c.consumer || ': ' || c.outcome, NULL, NULL, e.id)
       FROM consumed_events c JOIN outbox_events e ON e.id = c.event_id
      WHERE c.consumer = NEW.consumer AND c.event_id = NEW.event_id AND e.aggregate_type = 'order';
    RETURN NULL;
END
$$;
CREATE CONSTRAINT TRIGGER consumed_events_journal AFTER INSERT ON consumed_events
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION journal_consumed();

-- A message id that is not an event id (not a uuid) is no order's.
CREATE FUNCTION journal_dead_letter() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.message_id !~* '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$' THEN
        RETURN NULL;
    END IF;
    PERFORM journal_write(e.aggregate_id, 'dead_letter',
        NEW.subject || ' to ' || NEW.consumer || ': dead letter ' || NEW.status
            || ' after ' || NEW.deliveries || ' deliveries (' || NEW.error || ')',
        NULL, NULL, e.id)
       FROM outbox_events e
      WHERE e.id = NEW.message_id::uuid AND e.aggregate_type = 'order';
    RETURN NULL;
END
$$;
CREATE TRIGGER dead_letters_journal_insert AFTER INSERT ON dead_letters
    FOR EACH ROW EXECUTE FUNCTION journal_dead_letter();
CREATE TRIGGER dead_letters_journal_update AFTER UPDATE OF status ON dead_letters
    FOR EACH ROW WHEN (OLD.status IS DISTINCT FROM NEW.status) EXECUTE FUNCTION journal_dead_letter();

-- The consumer claims a fulfillment as `backordered` and ships it in the same transaction when
-- the stock is there: written at the commit, from the state the row has then, each state once.
CREATE FUNCTION journal_fulfillment() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    said text;
BEGIN
    SELECT 'fulfillment ' || f.status || coalesce(', shipment ' || f.shipment_no, '') INTO said
      FROM fulfillments f WHERE f.id = NEW.id;
    IF said IS NOT NULL AND NOT EXISTS (
        SELECT 1 FROM order_journal
         WHERE order_id = NEW.order_id AND kind = 'fulfillment' AND summary = said) THEN
        PERFORM journal_write(NEW.order_id, 'fulfillment', said, NULL, NULL, NULL);
    END IF;
    RETURN NULL;
END
$$;
CREATE CONSTRAINT TRIGGER fulfillments_journal_insert AFTER INSERT ON fulfillments
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION journal_fulfillment();
CREATE CONSTRAINT TRIGGER fulfillments_journal_update AFTER UPDATE OF status ON fulfillments
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW WHEN (OLD.status IS DISTINCT FROM NEW.status)
    EXECUTE FUNCTION journal_fulfillment();

CREATE FUNCTION journal_email() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM journal_write(NEW.order_id, 'email',
        NEW.kind || ' email to the shopper: ' || NEW.status
            || coalesce(' (' || NEW.last_error || ')', ''),
        NULL, NULL, NULL);
    RETURN NULL;
END
$$;
CREATE TRIGGER emails_journal_insert AFTER INSERT ON emails
    FOR EACH ROW EXECUTE FUNCTION journal_email();
CREATE TRIGGER emails_journal_update AFTER UPDATE OF status ON emails
    FOR EACH ROW WHEN (OLD.status IS DISTINCT FROM NEW.status) EXECUTE FUNCTION journal_email();

CREATE FUNCTION journal_finding() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM journal_write(
        journal_order_of_payment(NEW.payment_id::text, NEW.provider_charge_id), 'finding',
        CASE TG_OP WHEN 'INSERT' THEN 'reconciler finding ' || NEW.kind || ': ' || NEW.detail
                   ELSE 'finding ' || NEW.kind || ' ' || NEW.status END,
        NEW.payment_id, NEW.provider_charge_id, NULL);
    RETURN NULL;
END
$$;
CREATE TRIGGER reconcile_findings_journal_insert AFTER INSERT ON reconcile_findings
    FOR EACH ROW EXECUTE FUNCTION journal_finding();
CREATE TRIGGER reconcile_findings_journal_update AFTER UPDATE OF status ON reconcile_findings
    FOR EACH ROW WHEN (OLD.status IS DISTINCT FROM NEW.status) EXECUTE FUNCTION journal_finding();

CREATE FUNCTION journal_refund() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM journal_write(
        journal_order_of_payment(NEW.payment_id::text, NEW.provider_charge_id), 'refund',
        'charge ' || NEW.provider_charge_id || ' refunded by the provider (refund '
            || NEW.provider_refund_id || ')',
        NEW.payment_id, NEW.provider_charge_id, NULL);
    RETURN NULL;
END
$$;
CREATE TRIGGER provider_refunds_journal AFTER INSERT ON provider_refunds
    FOR EACH ROW EXECUTE FUNCTION journal_refund();

-- The console's charts: one sample per interval, whichever instance takes it first.
CREATE TABLE console_samples (
    at                    timestamptz NOT NULL,
    outbox_unpublished    integer     NOT NULL,
    outbox_lag_ms         bigint      NOT NULL,
    deliveries_waiting_pg integer     NOT NULL,
    -- NULL while the bus is PostgreSQL's: JetStream's pending count is read only where it runs.
    deliveries_waiting_js integer,
    dead_letters          integer     NOT NULL,
    new_keys              integer     NOT NULL,
    replays               integer     NOT NULL,
    in_progress           integer     NOT NULL,
    key_reused            integer     NOT NULL,
    CONSTRAINT console_samples_pkey PRIMARY KEY (at)
);
