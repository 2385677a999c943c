-- A new payment attempt is inserted already stamped with its first charge call
-- (`charge_requested_at`, docs/design.md, "Payments"): the call follows the insert's commit,
-- so the stamp's own UPDATE and commit were one more round trip for nothing. The journal
-- keeps both entries: the attempt recorded, then the call started.
-- PL/pgSQL, like the journal's other functions, so its plan is kept (docs/design.md, "The
-- order journal").
CREATE FUNCTION journal_provider_call(p payments) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    PERFORM journal_write(p.order_id, 'provider_call',
        'charge call to the provider started (recovery point 2; provider key from the attempt)',
        p.id, NULL, NULL);
END
$$;

CREATE OR REPLACE FUNCTION journal_payment() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        PERFORM journal_write(NEW.order_id, 'payment',
            'payment attempt recorded (recovery point 1), ' || NEW.amount_cents || ' ' || NEW.currency,
            NEW.id, NULL, NULL);
        IF NEW.charge_requested_at IS NOT NULL THEN
            PERFORM journal_provider_call(NEW);
        END IF;
    ELSIF NEW.charge_requested_at IS DISTINCT FROM OLD.charge_requested_at THEN
        PERFORM journal_provider_call(NEW);
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
