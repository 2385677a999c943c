-- A payment attempt is recorded with its first charge call stamped (`charge_requested_at`,
-- server/src/payments/store.rs): it is recorded only to be charged at once, so the call's
-- stamp joins the attempt's commit instead of costing a statement and a commit of its own
-- (docs/payments.md, "Recovery points"). The journal still tells both: the attempt recorded,
-- then the charge call started; later calls are stamped, and written, as before.
CREATE OR REPLACE FUNCTION journal_payment() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        PERFORM journal_write(NEW.order_id, 'payment',
            'payment attempt recorded (recovery point 1), ' || NEW.amount_cents || ' ' || NEW.currency,
            NEW.id, NULL, NULL);
    END IF;
    IF (TG_OP = 'INSERT' AND NEW.charge_requested_at IS NOT NULL)
       OR (TG_OP = 'UPDATE' AND NEW.charge_requested_at IS DISTINCT FROM OLD.charge_requested_at) THEN
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
