-- A payment attempt is recorded with its first charge call stamped (`charge_requested_at`,
-- server/src/payments/store.rs): it is recorded only to be charged at once, so the call's
-- stamp joins the attempt's commit instead of costing a statement and a commit of its own
-- (docs/payments.md, "Recovery points"). The journal still tells both: the attempt recorded,
-- then the charge call started; later calls are stamped, and written, as before.

-- The stamp is the time the row is written, after the wait for the order's lock, not the
-- statement's start: an attempt that waited seconds behind another payment of its order
-- would otherwise commit with a stamp already seconds old, and look quiet to a settle that
-- much sooner (server/src/payments/settle.rs).
CREATE FUNCTION payments_stamp_first_call() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.charge_requested_at IS NOT NULL THEN
        NEW.charge_requested_at := clock_timestamp();
    END IF;
    RETURN NEW;
END
$$;
CREATE TRIGGER payments_stamp_first_call BEFORE INSERT ON payments
    FOR EACH ROW EXECUTE FUNCTION payments_stamp_first_call();
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
